/**
 * One conversation served by two processes sharing the database (as behind a load balancer):
 * 1. a message landing on the second process while the first is still answering waits for that
 *    turn, and each process's model sees every message and reply, whichever process handled them;
 * 2. a turn outlasting its lease keeps the conversation: its process renews the lease while it runs;
 * 3. the widget sockets on either process get every stored message once, whichever process stored
 *    it, also after the connections that listen for them were cut;
 * 4. a message that commits after a later one still reaches the sockets.
 * The waits for a turn and the lease renewals run on each process's manual clock, moved by the test.
 */
import t from 'tap';
import WebSocket from 'ws';
import { ManualClock } from '../runtime/clock.js';
import { startFakeOpenAi } from './fakes/openai.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { opened, subscribed, whenFrames } from './helpers/socket.js';

/** The engine's waits for another process's turn are 25 ms to 500 ms; the process's other timers (polls, sweeps, heartbeats) are longer. */
const TURN_WAIT_MS = 500;

/**
 * Resolves once the process waits for a turn again (sets a timer of a turn wait's length): the
 * re-arming of its longer timers (the channel outbox's poll, every second) does not count, so
 * its look at the conversation is over when this resolves.
 */
async function waitsForTurn(clock: ManualClock): Promise<void> {
  while ((await clock.nextTimer()) > TURN_WAIT_MS);
}

/** Moves `clock` past the wait of a process that waits for another's turn, and resolves once it waits again. */
async function looksAgain(clock: ManualClock): Promise<void> {
  const waitsAgain = waitsForTurn(clock);
  clock.advance(1_000);
  await waitsAgain;
}

t.test('turns of one conversation on two processes run one after the other, on the whole history', async (t) => {
  const fake = await startFakeOpenAi(t);
  const databaseUrl = await freshDatabase();
  const config = { databaseUrl, llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'k' } } };
  const a = await startTestPlatform(t, config);
  const clock = new ManualClock();
  const b = await startTestPlatform(t, config, { clock });
  const owner = await a.user();
  const bot = await a.assistant(owner.token, { llm_model_id: 1, initial_message: 'Hello.' });
  const id = (await a.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const say = (process: typeof a, message: string) => process.request('POST', `/conversations/${id}/messages`, { body: { message } });
  const asked = (n: number) => fake.requests.filter((r) => r.path.includes('chat'))[n]!.body.messages.slice(1).map((m: { content: string }) => m.content);

  let release!: () => void;
  fake.scriptChat({ text: 'Answer one.', heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Answer two.' }, { text: 'Answer three.' });
  const first = say(a, 'First');
  await fake.received(1);
  const waits = waitsForTurn(clock);
  const second = say(b, 'Second');
  // The second process finds the turn taken and waits; nothing reaches the model until it ends,
  // however often it looks again.
  await waits;
  for (let i = 0; i < 5; i++) await looksAgain(clock);
  t.equal(fake.requests.filter((r) => r.path.includes('chat')).length, 1, 'the second turn waits');
  release();
  t.match((await first).body, { status: true, message: 'Answer one.' });
  clock.advance(1_000);
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
  const [clockA, clockB] = [new ManualClock(), new ManualClock()];
  const a = await startTestPlatform(t, config, { clock: clockA, conversationTurnLeaseSeconds: 30 });
  const b = await startTestPlatform(t, config, { clock: clockB, conversationTurnLeaseSeconds: 30 });
  const owner = await a.user();
  const bot = await a.assistant(owner.token, { llm_model_id: 1, initial_message: 'Hello.' });
  const id = (await a.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const chats = () => fake.requests.filter((r) => r.path.includes('chat'));
  let release!: () => void;
  fake.scriptChat({ text: 'Slow answer.', heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Next answer.' });
  const first = a.request('POST', `/conversations/${id}/messages`, { body: { message: 'Slow' } });
  await fake.received(1);
  const waits = waitsForTurn(clockB);
  const second = b.request('POST', `/conversations/${id}/messages`, { body: { message: 'Next' } });
  await waits;
  for (let lease = 0; lease < 4; lease++) {
    // The lease runs out in the database, as when its length has passed with nothing renewing it...
    await withClient(databaseUrl, (db) => db.query(`UPDATE conversations SET turn_until = now() WHERE id = $1`, [id]));
    // ...but the first process renews it every third of a lease while its turn runs.
    clockA.advance(10_000);
    await clockA.settled();
    await looksAgain(clockB);
  }
  t.equal(chats().length, 1, 'the second process still waits');
  release();
  t.match((await first).body, { message: 'Slow answer.' });
  clockB.advance(1_000);
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
  for (const [process, listener] of [[a, onA], [b, onB]] as const) {
    await subscribed(listener.socket);
    await process.platform.runtime.services.conversationEngine.watching(id);
  }

  const viaB = await b.request('POST', `/conversations/${id}/messages`, { body: { message: 'Asked on B' } });
  t.equal(viaB.status, 200);
  onA.socket.send(JSON.stringify({ type: 'message', text: 'Asked on A' }));
  const expected = ['user: Asked on B', `assistant: ${viaB.body.message}`, 'user: Asked on A'];
  for (const [name, listener] of [['A', onA], ['B', onB]] as const) {
    await whenFrames(listener.socket, () => listener.messages.length >= 4);
    t.same(listener.messages.slice(0, 3), expected, `${name}: in order`);
    t.match(listener.messages[3], /^assistant: /);
  }

  // The connections that listen are cut (a database restart, a proxy): they come back, and what was stored meanwhile arrives.
  await withClient(databaseUrl, (db) => db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'`));
  const later = await b.request('POST', `/conversations/${id}/messages`, { body: { message: 'While A was away' } });
  const afterwards = ['user: While A was away', `assistant: ${later.body.message}`];
  for (const [name, listener] of [['A', onA], ['B', onB]] as const) {
    await whenFrames(listener.socket, () => listener.messages.includes(afterwards[1]!));
    // A message sent twice would stand before the later ones.
    t.same(listener.messages.slice(4), afterwards, `${name}: four messages, none twice, then the two stored while A's connection was cut`);
  }
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
  await subscribed(socket);
  const heard = async (content: string) => {
    await whenFrames(socket, () => messages.includes(content));
    return true;
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
