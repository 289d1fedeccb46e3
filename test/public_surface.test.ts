/**
 * What the public sees of a conversation, and what only its owner sees:
 * 1. `test` conversations need the owner's token (422 without one or with another user's, as
 *    `api`; 401 with a wrong one); `widget` ones stay public and charged.
 * 2. a reply that called the owner's endpoint: without the owner's token (none, or another
 *    user's) the reply has `function_calls: []` and the history no function calls, and neither says
 *    what the endpoint answered; with it both carry them; a wrong token is 401.
 * 3. the widget socket never sends function calls, whoever sent the message: deltas and messages
 *    with `function_calls: []` only.
 * 4. a failing model: visitors (REST and socket) read "The assistant is not available right now.",
 *    the owner the reason; the log has the reason with the conversation, assistant and owner ids.
 * 5. the specification's messages are the same for everyone.
 */
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { startFakeOpenAi } from './fakes/openai.js';
import { startTestPlatform } from './helpers/platform.js';
import { opened } from './helpers/socket.js';
import { startSite } from './helpers/site.js';

const GENERIC = 'The assistant is not available right now.';
/** What the owner's CRM answers: it must reach no visitor. */
const SECRET = 'crm-internal-7f3a';

const fake = await startFakeOpenAi(t);
const site = await startSite(t);
site.route('/crm', () => ({ type: 'application/json', body: JSON.stringify({ customer: 'Ada', note: SECRET }) }));
const logs: Array<Record<string, unknown>> = [];
const api = await startTestPlatform(
  t,
  {
    llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'k' } },
    outboundAllowPrivate: true,
    rateLimits: { perIp: { capacity: 10_000, perMinute: 10_000 }, perConversation: { capacity: 10_000, perMinute: 10_000 } },
  },
  {},
  (line) => logs.push(line),
);
const owner = await api.user('Owner');
const stranger = await api.user('Stranger');
await api.credit(owner.id, 5);
const tool = await api.request('POST', '/user/tools', {
  token: owner.token,
  body: { name: 'crm_lookup', description: 'Looks the customer up', endpoint: `${site.origin}/crm`, method: 'GET', schema: [{ name: 'email', type: 'string', description: 'The email' }] },
});
const bot = await api.assistant(owner.token, { initial_message: 'Hello.', tool_ids: [tool.body.data.id] });

const start = (body: Record<string, unknown>, token?: string) => api.request('POST', '/conversations', { token, body: { assistant_id: bot.uuid, ...body } });
const say = (id: string, message: string, token?: string) => api.request('POST', `/conversations/${id}/messages`, { token, body: { message } });
const history = (id: string, token?: string) => api.request('GET', `/conversations/${id}`, { token });
const balance = async () => (await api.request('GET', '/user', { token: owner.token })).body.data.balance as number;
const widgetConversation = async () => (await start({})).body.conversation_id as string;
const CRM_CALL = { name: 'crm_lookup', arguments: { email: 'ada@example.com' }, result: { customer: 'Ada', note: SECRET } };
const scriptCrmTurn = (text: string) => fake.scriptChat({ toolCalls: [{ name: 'crm_lookup', arguments: { email: 'ada@example.com' } }] }, { text });

interface Client {
  readonly frames: any[];
  readonly raw: string[];
  send(text: string): void;
  /** Resolves with the first frame (received already or from now on) that matches. */
  next(match: (frame: any) => boolean): Promise<any>;
}

async function connect(t: Test, id: string): Promise<Client> {
  const socket = await opened(t, new WebSocket(`${api.origin.replace('http', 'ws')}/ws/conversations/${id}`));
  const frames: any[] = [];
  const raw: string[] = [];
  const waiters: Array<{ match: (frame: any) => boolean; resolve: (frame: any) => void }> = [];
  socket.on('message', (data) => {
    raw.push(String(data));
    const frame = JSON.parse(String(data));
    frames.push(frame);
    for (const waiter of [...waiters]) {
      if (!waiter.match(frame)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(frame);
    }
  });
  return {
    frames,
    raw,
    send: (text) => socket.send(JSON.stringify({ type: 'message', text })),
    next: (match) =>
      new Promise((resolve) => {
        const seen = frames.find(match);
        if (seen) resolve(seen);
        else waiters.push({ match, resolve });
      }),
  };
}

t.test('test conversations need the owner token; widget conversations stay public and charged', async (t) => {
  const anonymous = await start({ type: 'test' });
  t.same([anonymous.status, anonymous.body], [422, { message: 'The test type needs the API key or session token of the assistant owner.', errors: { type: ['The test type needs the API key or session token of the assistant owner.'] } }]);
  const api422 = await start({ type: 'api' });
  t.same([api422.status, Object.keys(api422.body).sort()], [422, ['errors', 'message']], 'refused as api conversations are');
  const foreign = await start({ type: 'test' }, stranger.token);
  t.same([foreign.status, foreign.body.errors], [422, { type: ['The test type needs the API key or session token of the assistant owner.'] }], "another user's token is no owner's");
  const wrong = await start({ type: 'test' }, 'aps_wrong');
  t.same([wrong.status, wrong.body], [401, { message: 'Unauthenticated.' }]);

  const own = await start({ type: 'test' }, owner.token);
  t.match(own.body, { status: true, conversation_id: /^[0-9a-f-]{36}$/, history: [{ role: 'assistant', content: 'Hello.' }] });
  const before = await balance();
  fake.scriptChat({ text: 'Free answer.' });
  t.equal((await say(own.body.conversation_id, 'hi', owner.token)).body.message, 'Free answer.');
  t.equal(await balance(), before, 'test messages are free');

  const widget = await start({});
  t.equal(widget.status, 200, 'widget conversations need no token');
  fake.scriptChat({ text: 'Paid answer.' });
  t.equal((await say(widget.body.conversation_id, 'hi')).body.message, 'Paid answer.');
  t.equal(Math.round((before - (await balance())) * 100) / 100, 0.01, 'and are charged to the owner');
});

t.test('function calls are for the owner token alone', async (t) => {
  const id = await widgetConversation();
  scriptCrmTurn('You are Ada.');
  const visitorReply = await say(id, 'Who am I? ada@example.com');
  t.same(visitorReply.body, { status: true, message: 'You are Ada.', function_calls: [] }, 'the key is kept, empty');
  t.notMatch(JSON.stringify(visitorReply.body), SECRET);

  scriptCrmTurn('Still Ada.');
  const strangerReply = await say(id, 'Again?', stranger.token);
  t.same(strangerReply.body, { status: true, message: 'Still Ada.', function_calls: [] }, "another user's token sees what a visitor sees");

  scriptCrmTurn('Ada, as before.');
  const ownerReply = await say(id, 'Once more?', owner.token);
  t.same(ownerReply.body, { status: true, message: 'Ada, as before.', function_calls: [CRM_CALL] });

  const words = [
    { role: 'assistant', content: 'Hello.' },
    { role: 'user', content: 'Who am I? ada@example.com' },
    { role: 'assistant', content: 'You are Ada.' },
    { role: 'user', content: 'Again?' },
    { role: 'assistant', content: 'Still Ada.' },
    { role: 'user', content: 'Once more?' },
    { role: 'assistant', content: 'Ada, as before.' },
  ];
  for (const [who, token] of [['a visitor', undefined], ['another user', stranger.token]] as const) {
    const read = await history(id, token);
    t.same(read.body, { status: true, history: words }, `${who}: words only`);
  }
  const ownView = await history(id, owner.token);
  t.same(ownView.body.history, words.map((m, i) => (m.role === 'assistant' && i > 0 ? { ...m, function_calls: [CRM_CALL] } : m)), 'the owner: every call with its arguments and result');

  for (const request of [history(id, 'aps_wrong'), say(id, 'hi', 'aps_wrong')]) {
    const refused = await request;
    t.same([refused.status, refused.body], [401, { message: 'Unauthenticated.' }], 'a wrong token is refused, not taken for a visitor');
  }
  const listed = (await api.request('GET', '/user/conversations', { token: owner.token })).body.data.find((c: { id: string }) => c.id === id);
  t.match(listed, { message_count: 7, type: 'widget' }, "in the owner's listing");
});

t.test('the widget socket carries words only, whoever sent the message', async (t) => {
  const id = await widgetConversation();
  const client = await connect(t, id);
  scriptCrmTurn('Over the socket: Ada.');
  client.send('Who am I? ada@example.com');
  const first = await client.next((f) => f.type === 'message' && f.role === 'assistant');
  t.same(first, { type: 'message', id: first.id, role: 'assistant', content: 'Over the socket: Ada.', function_calls: [] });
  t.type(first.id, 'number', 'a message id, nothing else added');
  t.equal(client.frames.filter((f) => f.type === 'delta').map((f) => f.text).join(''), 'Over the socket: Ada.', 'the words stream');

  scriptCrmTurn('Over REST: Ada.');
  t.equal((await say(id, 'And now?', owner.token)).body.function_calls.length, 1, 'the owner sent it and has the call');
  const second = await client.next((f) => f.type === 'message' && f.content === 'Over REST: Ada.');
  t.same(second, { type: 'message', id: second.id, role: 'assistant', content: 'Over REST: Ada.', function_calls: [] });

  t.same([...new Set(client.frames.map((f) => f.type))].sort(), ['delta', 'message', 'typing']);
  t.notOk(client.raw.some((frame) => frame.includes(SECRET) || frame.includes('crm_lookup')), "nothing of the call or the endpoint's answer");
  t.ok(client.frames.filter((f) => f.type === 'message').every((f) => Array.isArray(f.function_calls) && f.function_calls.length === 0));
});

t.test('a failing model: visitors read the generic message, the owner and the log the reason', async (t) => {
  const id = await widgetConversation();
  const reasonLines = () => logs.filter((line) => line.msg === 'reply failed' && line.conversationId === id);

  fake.scriptChat({ status: 500 }, { status: 500 });
  const visitor = await say(id, 'Are you there?');
  t.same([visitor.status, visitor.body], [502, { status: false, error: GENERIC }]);
  t.match(reasonLines().at(-1), { level: 40, conversationId: id, assistantId: bot.id, userId: owner.id, err: { message: 'the model provider answered 500' } }, 'the reason is logged with whose it is');

  fake.scriptChat({ status: 500 }, { status: 500 });
  const foreign = await say(id, 'Hello?', stranger.token);
  t.same([foreign.status, foreign.body], [502, { status: false, error: GENERIC }]);

  fake.scriptChat({ status: 500 }, { status: 500 });
  const own = await say(id, 'Owner here.', owner.token);
  t.same([own.status, own.body], [502, { status: false, error: 'Failed to process message: the model provider answered 500' }]);

  const client = await connect(t, id);
  fake.scriptChat({ status: 500 }, { status: 500 });
  client.send('Over the socket?');
  t.same(await client.next((f) => f.type === 'error'), { type: 'error', error: GENERIC });
  t.equal(reasonLines().length, 4, 'every failure is logged');

  fake.scriptChat({ text: 'Back.' });
  t.equal((await say(id, 'Now?')).body.message, 'Back.', 'the conversation goes on');
});

t.test("the specification's messages are the same for everyone", async (t) => {
  const missing = '00000000-0000-4000-8000-000000000000';
  for (const token of [undefined, owner.token, stranger.token]) {
    const who = token === undefined ? 'no token' : token === owner.token ? 'the owner' : 'another user';
    const unknownAssistant = await api.request('POST', '/conversations', { token, body: { assistant_id: missing } });
    t.same([unknownAssistant.status, unknownAssistant.body], [404, { status: false, error: 'Assistant not found' }], `${who}: create`);
    for (const request of [history(missing, token), say(missing, 'hi', token)]) {
      const unknown = await request;
      t.same([unknown.status, unknown.body], [404, { status: false, error: 'Conversation not found' }], `${who}: read and send`);
    }
    const invalid = await say(missing, '', token);
    t.same([invalid.status, invalid.body.errors], [422, { message: ['The message field is required.'] }], `${who}: validation`);
  }

  const poor = await api.user('Poor');
  await api.credit(poor.id, 0.01);
  const poorBot = await api.assistant(poor.token);
  const id = (await api.request('POST', '/conversations', { body: { assistant_id: poorBot.uuid } })).body.conversation_id as string;
  fake.scriptChat({ text: 'The last one paid for.' });
  t.equal((await say(id, 'one')).status, 200);
  const client = await connect(t, id);
  client.send('two');
  t.same(await client.next((f) => f.type === 'error'), { type: 'error', error: 'Insufficient balance. Please top up your account.' }, 'on the socket');
  for (const token of [undefined, poor.token]) {
    const refused = await say(id, 'three', token);
    t.same([refused.status, refused.body], [402, { status: false, error: 'Insufficient balance. Please top up your account.' }]);
  }
  const create = await api.request('POST', '/conversations', { body: { assistant_id: poorBot.uuid } });
  t.same([create.status, create.body], [402, { status: false, error: 'Insufficient balance. Please top up your account.' }]);
});
