/**
 * The realtime widget socket:
 * 1. two sockets on one conversation both receive the streamed reply (deltas, then the stored
 *    user and assistant messages), whether the message came over a socket or over REST.
 * 2. function calls are not streamed (the socket is public): the reply's message carries none.
 * 3. malformed frames (not JSON, unknown type, empty text, binary) get an error frame and the
 *    socket stays usable; a failure of the reply is an error frame too, with the generic message.
 * 4. an unknown conversation is closed at once with 4404, whatever was sent meanwhile;
 * 5. a message sent right after opening, before the conversation is found, is answered;
 * 6. sockets closed as soon as they open, before their conversation is found, leave the counts;
 * 7. while the lookup waits (the database busy), a socket may send 8 frames, answered once it is
 *    found; the ninth closes it with 1008.
 * 8. stored messages carry their id, and a turn is framed by typing events (active before the
 *    first delta, inactive after the reply);
 * 9. a socket opened with ?after=<id> is sent the messages stored after it, in order, then
 *    `synced` with the last id, and live frames after; ?after=0 replays the whole conversation (the
 *    visitor's view: no function calls), an id that is not a number replays nothing;
 * 10. an error about a message carries the message's client_id back (a valid one only).
 */
import pg from 'pg';
import { sql } from 'slonik';
import t from 'tap';
import WebSocket from 'ws';
import { startFakeOpenAi } from './fakes/openai.js';
import { startTestPlatform } from './helpers/platform.js';
import { fakeResolver } from './helpers/resolver.js';
import { opened } from './helpers/socket.js';

const fake = await startFakeOpenAi(t);
const resolver = fakeResolver();
const api = await startTestPlatform(t, { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'k' } } }, { lookup: resolver });
const owner = await api.user();
await api.credit(owner.id, 5);
const bot = await api.assistant(owner.token);
const uuid = bot.uuid;

interface Client {
  readonly socket: WebSocket;
  readonly frames: any[];
  /** Resolves with the first frame (from now on, or already received) that matches. */
  next(match: (frame: any) => boolean): Promise<any>;
}

async function connect(conversation: string, query = ''): Promise<Client> {
  const socket = new WebSocket(`${api.origin.replace('http', 'ws')}/ws/conversations/${conversation}${query}`);
  const frames: any[] = [];
  const waiters: Array<{ match: (f: any) => boolean; resolve: (f: any) => void }> = [];
  socket.on('message', (data) => {
    const frame = JSON.parse(data.toString());
    frames.push(frame);
    for (const waiter of [...waiters]) if (waiter.match(frame)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(frame);
    }
  });
  await opened(t, socket);
  return {
    socket,
    frames,
    next: (match) => new Promise((resolve) => {
      const seen = frames.find(match);
      if (seen) resolve(seen);
      else waiters.push({ match, resolve });
    }),
  };
}

const conversation = async () => (await api.request('POST', '/conversations', { body: { assistant_id: uuid } })).body.conversation_id as string;

t.test('two sockets receive the stream', async (t) => {
  const id = await conversation();
  const [a, b] = await Promise.all([connect(id), connect(id)]);
  fake.scriptChat({ text: 'Hello there, friend.' });
  a.socket.send(JSON.stringify({ type: 'message', text: 'Hi!' }));
  for (const client of [a, b]) {
    const reply = await client.next((f) => f.type === 'message' && f.role === 'assistant');
    t.same(reply, { type: 'message', id: reply.id, role: 'assistant', content: 'Hello there, friend.', function_calls: [] });
    t.type(reply.id, 'number');
    const deltas = client.frames.filter((f) => f.type === 'delta').map((f) => f.text);
    t.ok(deltas.length >= 2, 'streamed in pieces');
    t.equal(deltas.join(''), 'Hello there, friend.');
    const user = client.frames.find((f) => f.type === 'message' && f.role === 'user');
    t.same(user, { type: 'message', id: reply.id - 1, role: 'user', content: 'Hi!', function_calls: [] }, 'ids grow with each message');
    await client.next((f) => f.type === 'typing' && !f.active);
    const at = (match: (f: any) => boolean) => client.frames.findIndex(match);
    t.ok(at((f) => f.type === 'typing' && f.active) < at((f) => f.type === 'delta'), 'typing starts before the first delta');
    t.ok(at((f) => f.type === 'typing' && !f.active) > at((f) => f === reply), 'and ends after the reply');
  }
  fake.scriptChat({ text: 'Via REST.' });
  await api.request('POST', `/conversations/${id}/messages`, { body: { message: 'rest message' } });
  t.match(await b.next((f) => f.type === 'message' && f.content === 'Via REST.'), { role: 'assistant' }, 'REST messages stream to sockets too');
});

t.test('function calls are not streamed', async (t) => {
  // Not resolvable when the tool is created (so accepted), loopback when it is called.
  const tool = await api.request('POST', '/user/tools', { token: owner.token, body: { name: 'lookup', description: 'Look up', endpoint: 'http://lookup.example/lookup', method: 'POST' } });
  resolver.answers['lookup.example'] = ['127.0.0.1'];
  await api.request('PUT', `/user/assistant/${bot.id}`, { token: owner.token, body: { tool_ids: [tool.body.data.id] } });
  const id = await conversation();
  const client = await connect(id);
  fake.scriptChat({ toolCalls: [{ name: 'lookup', arguments: {} }] }, { text: 'The lookup failed.' });
  client.socket.send(JSON.stringify({ type: 'message', text: 'look it up' }));
  t.match(await client.next((f) => f.type === 'message' && f.role === 'assistant'), { type: 'message', role: 'assistant', content: 'The lookup failed.', function_calls: [] });
  t.notOk(client.frames.some((f) => f.type === 'function_call'), 'no function_call frame');
  const replayed = await connect(id, '?after=0');
  await replayed.next((f) => f.type === 'synced');
  t.same(replayed.frames.filter((f) => f.type === 'message').map((f) => [f.role, f.content, f.function_calls]), [['assistant', 'Hi', []], ['user', 'look it up', []], ['assistant', 'The lookup failed.', []]], 'a catch-up shows no function calls either');
  const own = (await api.request('GET', `/conversations/${id}`, { token: owner.token })).body.history.at(-1);
  t.match(own.function_calls, [{ name: 'lookup', arguments: {}, result: { error: /private or reserved/ } }], 'the guard refused the endpoint that now resolves to loopback; the model was told, and the owner sees it');
});

t.test('bad frames and failures are error frames', async (t) => {
  const id = await conversation();
  const client = await connect(id);
  const errors = () => client.frames.filter((f) => f.type === 'error').length;
  for (const [frame, pattern] of [
    ['not json', /not valid JSON/],
    [JSON.stringify({ type: 'dance' }), /Unknown frame type/],
    [JSON.stringify({ type: 'message', text: '' }), /1 to 2000/],
    [JSON.stringify({ type: 'message', text: 'x'.repeat(2001) }), /1 to 2000/],
  ] as const) {
    const count = errors();
    client.socket.send(frame);
    const error = await client.next((f) => f.type === 'error' && client.frames.filter((g) => g.type === 'error').length > count);
    t.match(error.error, pattern);
  }
  client.socket.send(Buffer.from([1, 2, 3]));
  t.match(await client.next((f) => f.type === 'error' && /JSON text/.test(f.error)), { type: 'error' });

  fake.scriptChat({ status: 500 }, { status: 500 });
  client.socket.send(JSON.stringify({ type: 'message', text: 'anyone?' }));
  t.same(await client.next((f) => f.type === 'error' && !/JSON|frame|text/.test(f.error)), { type: 'error', error: 'The assistant is not available right now.' });
  fake.scriptChat({ text: 'Still here.' });
  client.socket.send(JSON.stringify({ type: 'message', text: 'and now?' }));
  t.match(await client.next((f) => f.type === 'message' && f.content === 'Still here.'), { role: 'assistant' }, 'the socket stays usable');
});

t.test('unknown conversations are closed with 4404', async (t) => {
  const socket = new WebSocket(`${api.origin.replace('http', 'ws')}/ws/conversations/00000000-0000-4000-8000-000000000000`);
  socket.on('open', () => socket.send(JSON.stringify({ type: 'message', text: 'hello?' })));
  const frames: string[] = [];
  socket.on('message', (data) => frames.push(String(data)));
  const [code, reason] = await new Promise<[number, string]>((resolve) => socket.on('close', (code, reason) => resolve([code, String(reason)])));
  t.equal(code, 4404);
  t.equal(reason, 'Conversation not found');
  t.same(frames, [], 'nothing was answered');
});

t.test('a message sent as the socket opens waits for the conversation to be found', async (t) => {
  const conversation = (await api.request('POST', '/conversations', { body: { assistant_id: uuid, type: 'widget' } })).body.conversation_id as string;
  fake.scriptChat({ text: 'Right away.' });
  const socket = new WebSocket(`${api.origin.replace('http', 'ws')}/ws/conversations/${conversation}`);
  socket.on('open', () => socket.send(JSON.stringify({ type: 'message', text: 'first thing' })));
  t.teardown(() => socket.close());
  const reply = await new Promise<any>((resolve) =>
    socket.on('message', (data) => {
      const frame = JSON.parse(String(data));
      if (frame.type === 'message' && frame.role === 'assistant') resolve(frame);
    }),
  );
  t.equal(reply.content, 'Right away.');
});

t.test('sockets closed before their conversation is found leave the counts', async (t) => {
  const conversation = (await api.request('POST', '/conversations', { body: { assistant_id: uuid, type: 'widget' } })).body.conversation_id as string;
  const url = `${api.origin.replace('http', 'ws')}/ws/conversations/${conversation}`;
  const widgetSockets = async () => Number(/^open_sockets\{kind="widget"\} (\d+)$/m.exec(String((await api.request('GET', '//metrics')).body))?.[1] ?? 0);
  const before = await widgetSockets();
  await Promise.all(
    Array.from({ length: 16 }, () => {
      const socket = new WebSocket(url);
      socket.on('open', () => socket.close());
      return new Promise((resolve) => socket.on('close', resolve));
    }),
  );
  // The server let each socket go as it answered its close (see `closed` in helpers/socket.ts).
  t.equal(await widgetSockets(), before, 'none is left counted');
  const again = await Promise.all(Array.from({ length: 16 }, () => opened(t, new WebSocket(url))));
  t.equal(again.length, 16, 'the conversation takes 16 again');
});

t.test('frames sent while the conversation is looked up: 8 wait, the ninth closes the socket', async (t) => {
  const conversation = (await api.request('POST', '/conversations', { body: { assistant_id: uuid, type: 'widget' } })).body.conversation_id as string;
  const url = `${api.origin.replace('http', 'ws')}/ws/conversations/${conversation}`;
  // Every connection of the pool (4 in tests) waits on a lock the test holds: the sockets' lookups
  // wait for one until the test lets it go.
  const holder = new pg.Client({ connectionString: api.databaseUrl });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query('SELECT pg_advisory_lock(4242)');
  const busy = Array.from({ length: 4 }, () => api.platform.runtime.pool.query(sql.unsafe`SELECT pg_advisory_xact_lock(4242)`));
  const patient = await opened(t, new WebSocket(url));
  const hasty = await opened(t, new WebSocket(url));
  const answers: any[] = [];
  patient.on('message', (data) => answers.push(JSON.parse(String(data))));
  for (let i = 0; i < 8; i++) patient.send('not json');
  const closed = new Promise<[number, string]>((resolve) => hasty.once('close', (code, reason) => resolve([code, String(reason)])));
  for (let i = 0; i < 9; i++) hasty.send('not json');
  t.same(await closed, [1008, 'Too many frames before the conversation was found.']);
  await holder.query('SELECT pg_advisory_unlock(4242)');
  await Promise.all(busy);
  while (answers.length < 8) await new Promise((resolve) => patient.once('message', resolve));
  t.ok(answers.every((frame) => frame.type === 'error' && /not valid JSON/.test(frame.error)), 'the 8 waiting frames are answered once it is found');
  t.equal(patient.readyState, WebSocket.OPEN);
});

t.test('a socket catches up from a message id', async (t) => {
  const id = await conversation();
  const whole = await connect(id, '?after=0');
  const synced = await whole.next((f) => f.type === 'synced');
  const greeting = whole.frames[0];
  t.match(greeting, { type: 'message', role: 'assistant', content: 'Hi', function_calls: [] });
  t.same(synced, { type: 'synced', last_id: greeting.id }, 'the greeting, then synced');
  whole.socket.close();

  // Stored while no socket was open: a client that had the greeting asks from it.
  fake.scriptChat({ text: 'Missed reply.' });
  await api.request('POST', `/conversations/${id}/messages`, { body: { message: 'Sent elsewhere' } });
  const back = await connect(id, `?after=${greeting.id}`);
  const caughtUp = await back.next((f) => f.type === 'synced');
  const missed = back.frames.filter((f) => f.type === 'message');
  t.same(missed.map((f) => [f.role, f.content]), [['user', 'Sent elsewhere'], ['assistant', 'Missed reply.']], 'only what it missed, in order');
  t.equal(caughtUp.last_id, missed[1].id);
  t.ok(missed[0].id > greeting.id && missed[1].id > missed[0].id);

  // Live frames follow the catch-up.
  fake.scriptChat({ text: 'Live again.' });
  back.socket.send(JSON.stringify({ type: 'message', text: 'Still there?' }));
  t.match(await back.next((f) => f.type === 'message' && f.content === 'Live again.'), { role: 'assistant' });

  const none = await connect(id, '?after=abc');
  await subscribedClient(none);
  t.notOk(none.frames.some((f) => f.type === 'message' || f.type === 'synced'), 'an after that is no id replays nothing');
});

t.test('errors carry the client_id of their message', async (t) => {
  const client = await connect(await conversation());
  client.socket.send(JSON.stringify({ type: 'message', text: '', client_id: 'c-1_a' }));
  t.same(await client.next((f) => f.type === 'error'), { type: 'error', error: 'The text must be 1 to 2000 characters.', client_id: 'c-1_a' });
  client.socket.send(JSON.stringify({ type: 'message', text: '', client_id: '<b>no</b>' }));
  await client.next((f) => f.type === 'error' && client.frames.filter((g) => g.type === 'error').length === 2);
  t.notOk('client_id' in client.frames.filter((f) => f.type === 'error')[1], 'an invalid client_id is not echoed');
});

/** Resolves once the socket answered a frame sent now (so it has subscribed and sent any catch-up). */
async function subscribedClient(client: Client): Promise<void> {
  const count = client.frames.filter((f) => f.type === 'error').length;
  client.socket.send('not json');
  await client.next((f) => f.type === 'error' && client.frames.filter((g) => g.type === 'error').length > count);
}
