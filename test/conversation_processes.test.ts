/**
 * One conversation served by two processes sharing the database (as behind a load balancer):
 * a message landing on the second process while the first is still answering waits for that
 * turn, and each process's model sees every message and reply, whichever process handled them;
 * the widget sockets on either process get every stored message once, whichever process stored it.
 */
import t from 'tap';
import WebSocket from 'ws';
import { startFakeOpenAi } from './fakes/openai.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { opened } from './helpers/socket.js';

t.test('turns of one conversation on two processes run one after the other, on the whole history', async (t) => {
  const fake = await startFakeOpenAi(t);
  const databaseUrl = await freshDatabase();
  const config = { databaseUrl, llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'k' } } };
  const a = await startTestPlatform(t, config);
  const b = await startTestPlatform(t, config);
  const owner = await a.user();
  const bot = await a.assistant(owner.token, { llm_model_id: 1, initial_message: 'Hello.' });
  const id = (await a.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const say = (process: typeof a, message: string) => process.request('POST', `/conversations/${id}/messages`, { body: { message } });
  const asked = (n: number) => fake.requests.filter((r) => r.path.includes('chat'))[n]!.body.messages.slice(1).map((m: { content: string }) => m.content);

  let release!: () => void;
  fake.scriptChat({ text: 'Answer one.', heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Answer two.' }, { text: 'Answer three.' });
  const first = say(a, 'First');
  while (fake.requests.filter((r) => r.path.includes('chat')).length < 1) await new Promise((resolve) => setImmediate(resolve));
  const second = say(b, 'Second');
  // The second process waits for the first turn; nothing reaches the model until it ends.
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  t.equal(fake.requests.filter((r) => r.path.includes('chat')).length, 1, 'the second turn waits');
  release();
  t.match((await first).body, { status: true, message: 'Answer one.' });
  t.match((await second).body, { status: true, message: 'Answer two.' });
  t.match((await say(a, 'Third')).body, { status: true, message: 'Answer three.' });

  t.same(asked(0), ['Hello.', 'First']);
  t.same(asked(1), ['Hello.', 'First', 'Answer one.', 'Second'], "the second process's model sees the first turn");
  t.same(asked(2), ['Hello.', 'First', 'Answer one.', 'Second', 'Answer two.', 'Third'], "and the first process's sees the second");
  const history = (await b.request('GET', `/conversations/${id}`)).body.history.map((m: { content: string }) => m.content);
  t.same(history, ['Hello.', 'First', 'Answer one.', 'Second', 'Answer two.', 'Third', 'Answer three.'], 'stored in order');
});

t.test('a turn longer than its lease keeps the conversation: the lease is renewed while it runs', async (t) => {
  const fake = await startFakeOpenAi(t);
  const databaseUrl = await freshDatabase();
  const config = { databaseUrl, llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'k' } } };
  const a = await startTestPlatform(t, config, { conversationTurnLeaseSeconds: 0.3 });
  const b = await startTestPlatform(t, config, { conversationTurnLeaseSeconds: 0.3 });
  const owner = await a.user();
  const bot = await a.assistant(owner.token, { llm_model_id: 1, initial_message: 'Hello.' });
  const id = (await a.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const chats = () => fake.requests.filter((r) => r.path.includes('chat'));
  let release!: () => void;
  fake.scriptChat({ text: 'Slow answer.', heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Next answer.' });
  const first = a.request('POST', `/conversations/${id}/messages`, { body: { message: 'Slow' } });
  while (chats().length < 1) await new Promise((resolve) => setImmediate(resolve));
  const second = b.request('POST', `/conversations/${id}/messages`, { body: { message: 'Next' } });
  // Four lease lengths pass while the first turn is still being written.
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  t.equal(chats().length, 1, 'the second process still waits');
  release();
  t.match((await first).body, { message: 'Slow answer.' });
  t.match((await second).body, { message: 'Next answer.' });
  t.same(chats()[1]!.body.messages.slice(1).map((m: { content: string }) => m.content), ['Hello.', 'Slow', 'Slow answer.', 'Next']);
});

t.test("sockets on either process get each stored message once, whichever process stored it", async (t) => {
  const databaseUrl = await freshDatabase();
  const a = await startTestPlatform(t, { databaseUrl });
  const b = await startTestPlatform(t, { databaseUrl });
  const owner = await a.user();
  const bot = await a.assistant(owner.token, { initial_message: 'Hello.' });
  const id = (await a.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const listen = async (process: typeof a) => {
    const socket = await opened(t, new WebSocket(`${process.origin.replace('http', 'ws')}/ws/conversations/${id}`));
    const messages: string[] = [];
    socket.on('message', (data) => {
      const event = JSON.parse(data.toString());
      if (event.type === 'message') messages.push(`${event.role}: ${event.content}`);
    });
    return { socket, messages };
  };
  const onA = await listen(a);
  const onB = await listen(b);
  // Each socket's process knows where the conversation stands before anything is said.
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setTimeout(resolve, 10));

  const viaB = await b.request('POST', `/conversations/${id}/messages`, { body: { message: 'Asked on B' } });
  t.equal(viaB.status, 200);
  onA.socket.send(JSON.stringify({ type: 'message', text: 'Asked on A' }));
  const expected = ['user: Asked on B', `assistant: ${viaB.body.message}`, 'user: Asked on A'];
  const settled = async (listener: { messages: string[] }) => {
    for (let i = 0; i < 500 && listener.messages.length < 4; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    return listener.messages;
  };
  for (const [name, listener] of [['A', onA], ['B', onB]] as const) {
    const messages = await settled(listener);
    t.equal(messages.length, 4, `${name}: four messages, none twice`);
    t.same(messages.slice(0, 3), expected, `${name}: in order`);
    t.match(messages[3], /^assistant: /);
  }

  // The connections that listen are cut (a database restart, a proxy): they come back, and what was stored meanwhile arrives.
  await withClient(databaseUrl, (db) => db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'`));
  const later = await b.request('POST', `/conversations/${id}/messages`, { body: { message: 'While A was away' } });
  for (let i = 0; i < 500 && onA.messages.length < 6; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  t.same(onA.messages.slice(4), ['user: While A was away', `assistant: ${later.body.message}`], 'caught up after the connection came back');
});

t.test('a message that commits after a later one is still sent to the sockets', async (t) => {
  const databaseUrl = await freshDatabase();
  const a = await startTestPlatform(t, { databaseUrl });
  const owner = await a.user();
  const bot = await a.assistant(owner.token, { initial_message: 'Hello.' });
  const id = (await a.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const socket = await opened(t, new WebSocket(`${a.origin.replace('http', 'ws')}/ws/conversations/${id}`));
  const messages: string[] = [];
  socket.on('message', (data) => {
    const event = JSON.parse(data.toString());
    if (event.type === 'message') messages.push(event.content);
  });
  const heard = async (content: string) => {
    for (let i = 0; i < 500 && !messages.includes(content); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    return messages.includes(content);
  };
  await a.request('POST', `/conversations/${id}/messages`, { body: { message: 'Warm up' } });
  t.ok(await heard('Warm up'));

  // Two writers elsewhere: the one that took the lower id commits last.
  const pg = (await import('pg')).default;
  const [first, second] = [new pg.Client({ connectionString: databaseUrl }), new pg.Client({ connectionString: databaseUrl })];
  await Promise.all([first.connect(), second.connect()]);
  t.teardown(() => Promise.all([first.end(), second.end()]));
  const insert = (client: InstanceType<typeof pg.Client>, content: string) =>
    client.query(`INSERT INTO conversation_messages (conversation_id, role, content) VALUES ($1, 'user', $2) RETURNING id`, [id, content]);
  await first.query('BEGIN');
  const low = Number((await insert(first, 'Committed last')).rows[0].id);
  await second.query('BEGIN');
  const high = Number((await insert(second, 'Committed first')).rows[0].id);
  t.ok(low < high);
  await second.query(`SELECT pg_notify('conversation_messages', $1)`, [`${id} ${high}`]);
  await second.query('COMMIT');
  t.ok(await heard('Committed first'));
  await first.query(`SELECT pg_notify('conversation_messages', $1)`, [`${id} ${low}`]);
  await first.query('COMMIT');
  t.ok(await heard('Committed last'), 'the lower id, committed after the higher one was sent, arrives too');
  t.equal(messages.filter((m) => m === 'Committed first').length, 1, 'and nothing twice');
});
