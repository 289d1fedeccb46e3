/**
 * Text conversations over HTTP with a local fake of an OpenAI-compatible API:
 * 1. create: variables merged over the assistant's and rendered into the initial message (unknown
 *    placeholders empty); history holds it; unknown assistant 404; `api` and `test` need the owner's
 *    token; variables must be scalars; a malformed id is not found.
 * 2. a reply from the model; the system prompt carries the rendered variables; temperature passed.
 * 3. a mid-call tool round trip: the model calls it, the tool endpoint gets the arguments, the model
 *    gets the result, and history keeps {name, arguments, result} (the owner's view; visitors see
 *    none, see public_surface.test.ts).
 * 4. billing: 0.01 per widget message, test free; insufficient balance 402 on create and on send;
 *    10 concurrent messages on separate conversations with 0.05 -> exactly 5 answered.
 * 5. provider failure: 502, "Failed to process message: <reason>" to the owner and the generic
 *    message to a visitor; the user message kept, nothing charged.
 * 6. AI off: messages stored and charged, reply null.
 * 7. messages on one conversation are answered strictly in order.
 * 8. knowledge in function_call and prompt modes (dev model).
 * 9. a new server process on the same database continues a conversation (rehydration).
 * 10. listing with filters and the envelope; tenant isolation; validation; the assistant filter
 *     takes the UUID the listing shows as well as the integer id.
 * 11. a charged message a stopped process left without a reply is refunded once by the sweep.
 */
import t from 'tap';
import { startFakeOpenAi } from './fakes/openai.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { startSite } from './helpers/site.js';

const fake = await startFakeOpenAi(t);
const site = await startSite(t);
// Rate limits are tested in conversation_limits.test.ts; here they would only cap how much this file can do.
const config = {
  llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } },
  outboundAllowPrivate: true,
  rateLimits: { perIp: { capacity: 10_000, perMinute: 10_000 }, perConversation: { capacity: 10_000, perMinute: 10_000 } },
};
const api = await startTestPlatform(t, config);
const owner = await api.user('Owner');
const stranger = await api.user('Stranger');
await api.credit(owner.id, 10);

async function assistant(extra: Record<string, unknown> = {}, token = owner.token) {
  const created = await api.request('POST', '/user/assistant', {
    token,
    body: {
      name: 'Shop bot',
      voice_id: 1,
      language_id: 1,
      type: 'outbound',
      mode: 'pipeline',
      timezone: 'UTC',
      initial_message: 'Hi {{name}}, welcome to {{company}}{{missing}}!',
      system_prompt: 'You work for {{company}}. The customer is {{name}}.',
      llm_model_id: 1,
      llm_temperature: 0.3,
      variables: { company: 'Acme', name: 'friend' },
      ...extra,
    },
  });
  if (created.status !== 201) throw new Error(JSON.stringify(created.body));
  return (await api.request('GET', `/user/assistant/${created.body.data.id}`, { token })).body.data as { id: number; uuid: string };
}

const start = (uuid: string, body: Record<string, unknown> = {}, token?: string) => api.request('POST', '/conversations', { token, body: { assistant_id: uuid, ...body } });
const say = (id: string, message: string, token?: string) => api.request('POST', `/conversations/${id}/messages`, { token, body: { message } });
/** The owner's view of a conversation's history (with function calls). */
const ownerHistory = async (id: string) => (await api.request('GET', `/conversations/${id}`, { token: owner.token })).body.history;
const balance = async (token = owner.token) => (await api.request('GET', '/user', { token })).body.data.balance as number;

t.test('create and reply', async (t) => {
  const bot = await assistant();
  const created = await start(bot.uuid, { variables: { name: 'Ada' } });
  t.equal(created.status, 200);
  t.match(created.body, { status: true, conversation_id: /^[0-9a-f-]{36}$/, history: [{ role: 'assistant', content: 'Hi Ada, welcome to Acme!' }] });

  fake.scriptChat({ text: 'Hello Ada, how can I help?' });
  const before = await balance();
  const reply = await say(created.body.conversation_id, 'Do you ship to Spain?');
  t.same(reply.body, { status: true, message: 'Hello Ada, how can I help?', function_calls: [] });
  t.equal(Math.round((before - (await balance())) * 100) / 100, 0.01, 'one widget message charged');
  const request = fake.requests.at(-1)!.body;
  t.match(request, { model: 'gpt-4o-mini', temperature: 0.3, stream: true });
  t.same(request.messages[0], { role: 'system', content: 'You work for Acme. The customer is Ada.' });
  t.same(request.messages.slice(1), [
    { role: 'assistant', content: 'Hi Ada, welcome to Acme!' },
    { role: 'user', content: 'Do you ship to Spain?' },
  ]);

  const history = await api.request('GET', `/conversations/${created.body.conversation_id}`);
  t.same(history.body, {
    status: true,
    history: [
      { role: 'assistant', content: 'Hi Ada, welcome to Acme!' },
      { role: 'user', content: 'Do you ship to Spain?' },
      { role: 'assistant', content: 'Hello Ada, how can I help?' },
    ],
  });

  const unknown = await start('00000000-0000-4000-8000-000000000000');
  t.same([unknown.status, unknown.body], [404, { status: false, error: 'Assistant not found' }]);
  t.same((await api.request('GET', '/conversations/00000000-0000-4000-8000-000000000000')).body, { status: false, error: 'Conversation not found' });
  t.same((await say('not-a-uuid', 'hi')).body, { status: false, error: 'Conversation not found' });
  for (const malformed of ['-'.repeat(36), 'f'.repeat(36)]) {
    const found = await api.request('GET', `/conversations/${malformed}`);
    t.same([found.status, found.body], [404, { status: false, error: 'Conversation not found' }], `${malformed} names no conversation`);
  }
  const huge = await api.request('POST', '/conversations', { raw: `{"assistant_id":"${bot.uuid}","variables":{"n":1e400}}`, headers: { 'content-type': 'application/json' } });
  t.same([huge.status, huge.body.errors], [422, { 'variables.n': ['The variables.n must be a string, number or boolean.'] }], 'a number JSON cannot hold');
  const inheritedBot = await assistant({ initial_message: 'Hi {{constructor}}{{toString}}!' });
  t.equal((await start(inheritedBot.uuid)).body.history[0].content, 'Hi !', 'only the variables given fill placeholders');
  const nested = await start(bot.uuid, { variables: { name: { first: 'Ada' }, city: 'Rome' } });
  t.same([nested.status, nested.body.errors], [422, { 'variables.name': ['The variables.name must be a string, number or boolean.'] }]);
  const many = await start(bot.uuid, { variables: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`v${i}`, i])) });
  t.same(many.body.errors, { variables: ['The variables may not have more than 100 keys.'] });
  const invalid = await api.request('POST', `/conversations/${created.body.conversation_id}/messages`, { body: { message: 'x'.repeat(2001) } });
  t.same(invalid.body.errors, { message: ['The message may not be greater than 2000 characters.'] });
  const blank = await api.request('POST', `/conversations/${created.body.conversation_id}/messages`, { body: { message: ' \n\t ' } });
  t.same([blank.status, blank.body.errors], [422, { message: ['The message field is required.'] }], 'white space alone is no message (and is not charged)');
  t.equal((await start(bot.uuid, { type: 'api' })).status, 422, 'api type needs the owner token');
  t.equal((await start(bot.uuid, { type: 'api' }, stranger.token)).status, 422);
  t.match((await start(bot.uuid, { type: 'api' }, owner.token)).body, { status: true });
  t.same((await start(bot.uuid, { type: 'test' })).body.errors, { type: ['The test type needs the API key or session token of the assistant owner.'] }, 'test type needs the owner token');
  t.equal((await start(bot.uuid, { type: 'test' }, stranger.token)).status, 422);
  t.match((await start(bot.uuid, { type: 'test' }, owner.token)).body, { status: true });
});

t.test('a mid-call tool round trip', async (t) => {
  const calls: string[] = [];
  site.route('/orders', (req) => {
    calls.push(req.url ?? '');
    return { type: 'application/json', body: JSON.stringify({ order: 'A-17', status: 'shipped' }) };
  });
  const tool = await api.request('POST', '/user/tools', {
    token: owner.token,
    body: { name: 'check_order', description: 'Look up an order', endpoint: `${site.origin}/orders`, method: 'GET', headers: [{ name: 'X-Key', value: 'k' }], schema: [{ name: 'order_id', type: 'string', description: 'Order number' }] },
  });
  const bot = await assistant({ tool_ids: [tool.body.data.id] });
  const conversation = (await start(bot.uuid)).body.conversation_id;
  fake.scriptChat({ toolCalls: [{ name: 'check_order', arguments: { order_id: 'A-17' } }] }, { text: 'Your order A-17 has shipped.' });
  const reply = await say(conversation, 'Where is my order A-17?', owner.token);
  t.same(reply.body, { status: true, message: 'Your order A-17 has shipped.', function_calls: [{ name: 'check_order', arguments: { order_id: 'A-17' }, result: { order: 'A-17', status: 'shipped' } }] });
  t.same(calls, ['/orders?order_id=A-17']);
  const first = fake.requests.at(-2)!.body;
  t.same(first.tools[0].function, { name: 'check_order', description: 'Look up an order', parameters: { type: 'object', properties: { order_id: { type: 'string', description: 'Order number' } }, required: ['order_id'] } });
  const second = fake.requests.at(-1)!.body.messages.slice(-2);
  t.match(second[0], { role: 'assistant', tool_calls: [{ id: 'call_0_check_order', function: { name: 'check_order', arguments: '{"order_id":"A-17"}' } }] });
  t.same(second[1], { role: 'tool', tool_call_id: 'call_0_check_order', content: '{"order":"A-17","status":"shipped"}' });
  t.same((await ownerHistory(conversation)).at(-1), { role: 'assistant', content: 'Your order A-17 has shipped.', function_calls: [{ name: 'check_order', arguments: { order_id: 'A-17' }, result: { order: 'A-17', status: 'shipped' } }] });
  t.same((await api.request('GET', `/conversations/${conversation}`)).body.history.at(-1), { role: 'assistant', content: 'Your order A-17 has shipped.' }, 'a visitor reads the words only');
});

t.test('a null character from the model or a tool is stored replaced, and the reply is kept', async (t) => {
  site.route('/nul', () => ({ type: 'application/json', body: JSON.stringify({ note: 'a\u0000b' }) }));
  const tool = await api.request('POST', '/user/tools', {
    token: owner.token,
    body: { name: 'odd_lookup', description: 'Looks up something odd', endpoint: `${site.origin}/nul`, method: 'GET', schema: [] },
  });
  const bot = await assistant({ tool_ids: [tool.body.data.id] });
  const conversation = (await start(bot.uuid)).body.conversation_id;
  fake.scriptChat({ toolCalls: [{ name: 'odd_lookup', arguments: {} }] }, { text: 'Odd\u0000answer.' });
  const reply = await say(conversation, 'Anything odd?');
  t.equal(reply.status, 200);
  t.same((await ownerHistory(conversation)).at(-1), { role: 'assistant', content: 'Odd\uFFFDanswer.', function_calls: [{ name: 'odd_lookup', arguments: {}, result: { note: 'a\uFFFDb' } }] });

  site.route('/nul', () => ({ type: 'application/json', body: '[1, 2]' }));
  fake.scriptChat({ toolCalls: [{ name: 'odd_lookup', arguments: {} }] }, { text: 'Two items.' });
  t.same((await say(conversation, 'And a list?', owner.token)).body.function_calls, [{ name: 'odd_lookup', arguments: {}, result: { value: [1, 2] } }], 'a result that is no object is wrapped in one');
});

t.test('a live conversation follows changes to its assistant and its tools', async (t) => {
  site.route('/stock', () => ({ type: 'application/json', body: JSON.stringify({ in_stock: 3 }) }));
  const tool = await api.request('POST', '/user/tools', {
    token: owner.token,
    body: { name: 'check_stock', description: 'Checks the stock', endpoint: `${site.origin}/stock`, method: 'GET', schema: [] },
  });
  const bot = await assistant({ tool_ids: [tool.body.data.id] });
  const conversation = (await start(bot.uuid)).body.conversation_id;
  const asked = () => fake.requests.at(-1)!.body;
  fake.scriptChat({ text: 'First.' });
  await say(conversation, 'One');
  t.same(asked().tools.map((x: { function: { name: string } }) => x.function.name), ['check_stock']);
  await api.request('PUT', `/user/assistant/${bot.id}`, { token: owner.token, body: { system_prompt: 'You now work for Globex.' } });
  fake.scriptChat({ text: 'Second.' });
  await say(conversation, 'Two');
  t.same(asked().messages[0], { role: 'system', content: 'You now work for Globex.' }, 'the new prompt');
  await api.request('PUT', `/user/tools/${tool.body.data.id}`, { token: owner.token, body: { description: 'Counts the items in stock' } });
  fake.scriptChat({ text: 'Third.' });
  await say(conversation, 'Three');
  t.equal(asked().tools[0].function.description, 'Counts the items in stock', "the tool's new settings");
  await api.request('DELETE', `/user/tools/${tool.body.data.id}`, { token: owner.token });
  fake.scriptChat({ text: 'Fourth.' });
  await say(conversation, 'Four');
  t.notOk(asked().tools, 'a deleted tool is no longer offered');
  t.same(asked().messages.slice(-3).map((m: { content: string }) => m.content), ['Three', 'Third.', 'Four'], 'the history carried over');
});

t.test('a tool removed during a turn is not called by it', async (t) => {
  let called = 0;
  site.route('/secret', () => (called++, { type: 'application/json', body: '{"ok":true}' }));
  const tool = await api.request('POST', '/user/tools', { token: owner.token, body: { name: 'secret_lookup', description: 'Uses a key', endpoint: `${site.origin}/secret`, method: 'GET', schema: [] } });
  const bot = await assistant({ tool_ids: [tool.body.data.id] });
  const conversation = (await start(bot.uuid)).body.conversation_id;
  let release!: () => void;
  fake.scriptChat({ toolCalls: [{ name: 'secret_lookup', arguments: {} }], heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Done.' });
  const asked = fake.requests.length;
  const reply = say(conversation, 'Look it up', owner.token);
  await fake.received(asked + 1);
  t.equal(fake.requests.at(-1)!.body.messages?.at(-1)?.content, 'Look it up', 'the model is asked, its answer held');
  t.equal((await api.request('DELETE', `/user/tools/${tool.body.data.id}`, { token: owner.token })).status, 200);
  release();
  t.same((await reply).body.function_calls, [{ name: 'secret_lookup', arguments: {}, result: { error: 'There is no function named secret_lookup' } }]);
  t.equal(called, 0, 'the deleted tool was not called with its stored settings');
});

t.test('billing under concurrency and insufficient balance', async (t) => {
  const poor = await api.user('Poor');
  const bot = await assistant({}, poor.token);
  const refused = await start(bot.uuid);
  t.same([refused.status, refused.body], [402, { status: false, error: 'Insufficient balance. Please top up your account.' }]);
  const test = await start(bot.uuid, { type: 'test' }, poor.token);
  t.equal(test.status, 200, 'test conversations are free');
  t.equal((await say(test.body.conversation_id, 'hi', poor.token)).status, 200);

  await api.credit(poor.id, 0.1);
  const conversations = await Promise.all(Array.from({ length: 10 }, async () => (await start(bot.uuid)).body.conversation_id as string));
  await api.request('POST', `/admin/users/${poor.id}/balance`, { token: 'test-admin-token-0123456789', body: { amount: -0.05, reason: 'leave 0.05' } });
  const replies = await Promise.all(conversations.map((id) => say(id, 'hello')));
  t.equal(replies.filter((r) => r.status === 200).length, 5, 'exactly five answered');
  const refusedReplies = replies.filter((r) => r.status === 402);
  t.equal(refusedReplies.length, 5);
  t.same(refusedReplies[0]!.body, { status: false, error: 'Insufficient balance. Please top up your account.' });
  t.equal(await balance(poor.token), 0);
  const ledger = await withClient(api.databaseUrl, async (db) => (await db.query(`SELECT count(*)::int AS n FROM ledger_entries WHERE user_id = $1 AND kind = 'conversation_message'`, [poor.id])).rows[0].n);
  t.equal(ledger, 5, 'one ledger entry per answered message, none twice');
});

t.test('provider failure keeps the message and charges nothing', async (t) => {
  const bot = await assistant();
  const conversation = (await start(bot.uuid)).body.conversation_id;
  const before = await balance();
  fake.scriptChat({ status: 500 }, { status: 500 });
  const failed = await say(conversation, 'Are you there?');
  t.same([failed.status, failed.body], [502, { status: false, error: 'The assistant is not available right now.' }], 'a visitor reads the generic message');
  fake.scriptChat({ status: 500 }, { status: 500 });
  const told = await say(conversation, 'Still there?', owner.token);
  t.same([told.status, told.body], [502, { status: false, error: 'Failed to process message: the model provider answered 500' }], 'the owner reads the reason');
  t.equal(await balance(), before, 'nothing charged');
  const history = (await api.request('GET', `/conversations/${conversation}`)).body.history;
  t.same(history.slice(-2), [{ role: 'user', content: 'Are you there?' }, { role: 'user', content: 'Still there?' }], 'the user messages are kept');
  const list = (await api.request('GET', '/user/conversations', { token: owner.token })).body.data.find((c: { id: string }) => c.id === conversation);
  t.match(list, { total_cost: 0, message_count: 3 });
  fake.scriptChat({ text: 'Back again.' });
  t.equal((await say(conversation, 'Hello?')).body.message, 'Back again.', 'the conversation goes on');
});

t.test('AI off, then on', async (t) => {
  const bot = await assistant();
  const conversation = (await start(bot.uuid)).body.conversation_id;
  const off = await api.request('PATCH', `/user/conversations/${conversation}`, { token: owner.token, body: { ai_enabled: false } });
  t.match(off.body, { status: true, data: { ai_enabled: false } });
  const before = await balance();
  const requests = fake.requests.length;
  const reply = await say(conversation, 'A human please');
  t.same(reply.body, { status: true, message: null, function_calls: [] });
  t.equal(fake.requests.length, requests, 'no model call');
  t.equal(Math.round((before - (await balance())) * 100) / 100, 0.01, 'still charged');
  t.equal((await api.request('PATCH', `/user/conversations/${conversation}`, { token: stranger.token, body: { ai_enabled: true } })).status, 404);
  await api.request('PATCH', `/user/conversations/${conversation}`, { token: owner.token, body: { ai_enabled: true } });
  fake.scriptChat({ text: 'I am back.' });
  t.equal((await say(conversation, 'Bot?')).body.message, 'I am back.');
});

t.test('messages are answered in order', async (t) => {
  const bot = await assistant();
  const conversation = (await start(bot.uuid)).body.conversation_id;
  fake.scriptChat({ text: 'first', delayMs: 150 }, { text: 'second' }, { text: 'third' });
  const sent = ['one', 'two', 'three'];
  const replies = await Promise.all(sent.map((text) => say(conversation, text)));
  const history = (await api.request('GET', `/conversations/${conversation}`)).body.history.slice(1).map((m: { content: string }) => m.content);
  // Whatever order the three requests arrived in, each message is followed by its own reply
  // before the next message is taken: user, reply, user, reply...
  t.same(history.filter((_: string, i: number) => i % 2 === 1), ['first', 'second', 'third'], 'replies in processing order');
  t.same([...history.filter((_: string, i: number) => i % 2 === 0)].sort(), [...sent].sort(), 'never interleaved');
  sent.forEach((text, i) => t.equal(replies[i]!.body.message, history[history.indexOf(text) + 1], `"${text}" got the reply that follows it`));
});

t.test('a charged message left without a reply by a stopped process is refunded once', async (t) => {
  const engine = api.platform.runtime.services.conversationEngine;
  const bot = await assistant();
  const conversation = (await start(bot.uuid)).body.conversation_id as string;
  fake.scriptChat({ text: 'Answered.' });
  await say(conversation, 'An answered question');
  const off = (await start(bot.uuid)).body.conversation_id as string;
  await api.request('PATCH', `/user/conversations/${off}`, { token: owner.token, body: { ai_enabled: false } });
  await say(off, 'For a human');
  t.equal(await engine.refundUnanswered(0), 0, 'answered messages and messages with AI off owe nothing');

  // What a process that stopped after the charge and before the reply leaves behind.
  const before = await balance();
  const messageId = await withClient(api.databaseUrl, async (db) => {
    await db.query('BEGIN');
    const id = (await db.query(`INSERT INTO conversation_messages (conversation_id, role, content, cost, reply_pending) VALUES ($1, 'user', 'lost in a crash', 0.01, true) RETURNING id`, [conversation])).rows[0].id;
    await db.query(`UPDATE conversations SET message_count = message_count + 1, total_cost = total_cost + 0.01 WHERE id = $1`, [conversation]);
    await db.query(`INSERT INTO ledger_entries (user_id, amount, balance_after, kind, reference) VALUES ($1, -0.01, 0, 'conversation_message', $2)`, [owner.id, String(id)]);
    await db.query('COMMIT');
    return Number(id);
  });
  t.equal(Math.round((before - (await balance())) * 100) / 100, 0.01, 'charged');
  t.equal(await engine.refundUnanswered(60), 0, 'not before the turn could still be running');
  t.equal(await engine.refundUnanswered(0), 1);
  t.equal(await balance(), before, 'refunded');
  t.equal(await engine.refundUnanswered(0), 0, 'only once');
  const row = await withClient(api.databaseUrl, async (db) => (await db.query('SELECT cost::float8 AS cost, reply_pending FROM conversation_messages WHERE id = $1', [messageId])).rows[0]);
  t.same(row, { cost: 0, reply_pending: false });
  const listed = (await api.request('GET', `/user/conversations?assistant_id=${bot.id}`, { token: owner.token })).body.data.find((c: { id: string }) => c.id === conversation);
  t.equal(listed.total_cost, 0.01, 'the conversation costs what was answered');
});

t.test('knowledge in both modes with the dev model', async (t) => {
  const kb = (await api.request('POST', '/user/knowledgebases', { token: owner.token, body: { name: 'Policies' } })).body.data.id;
  const form = new FormData();
  form.set('name', 'Returns');
  form.set('type', 'txt');
  form.set('file', new Blob(['Returns are accepted within 30 days with a receipt.\n\nOur stores open at 8 am.']), 'returns.txt');
  const doc = (await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: owner.token, raw: form })).body.data.id;
  await api.platform.runtime.settled();
  t.equal((await api.request('GET', `/user/knowledgebases/${kb}/documents/${doc}`, { token: owner.token })).body.data.status, 'active', 'the document is ingested');
  const devModel = 6;
  const functionMode = await assistant({ llm_model_id: devModel, knowledgebase_id: kb, knowledgebase_mode: 'function_call' });
  const c1 = (await start(functionMode.uuid)).body.conversation_id;
  const r1 = await say(c1, 'How many days do I have for returns?', owner.token);
  t.equal(r1.body.function_calls[0].name, 'search_knowledgebase');
  t.match(r1.body.function_calls[0].result.passages[0].content, /30 days/);
  t.equal(r1.body.message, 'Returns are accepted within 30 days with a receipt. Our stores open at 8 am.', 'the best passage as plain sentences');

  const promptMode = await assistant({ llm_model_id: devModel, knowledgebase_id: kb, knowledgebase_mode: 'prompt' });
  const c2 = (await start(promptMode.uuid)).body.conversation_id;
  const r2 = await say(c2, 'When do stores open?');
  t.same(r2.body.function_calls, []);
  t.equal(r2.body.message, 'Our stores open at 8 am.', 'the sentence that answers, as plain text');
});

t.test('a new server continues the conversation', async (t) => {
  const bot = await assistant();
  const conversation = (await start(bot.uuid)).body.conversation_id;
  fake.scriptChat({ text: 'Noted: blue.' });
  await say(conversation, 'My favourite colour is blue.');
  const next = await startTestPlatform(t, { ...config, databaseUrl: api.databaseUrl });
  fake.scriptChat({ text: 'It is blue.' });
  const reply = await next.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'What is my favourite colour?' } });
  t.equal(reply.body.message, 'It is blue.');
  const sent = fake.requests.at(-1)!.body.messages.map((m: { content: string }) => m.content);
  t.ok(sent.includes('My favourite colour is blue.') && sent.includes('Noted: blue.'), 'the rebuilt actor sent the stored history');
});

t.test('listing', async (t) => {
  const lister = await api.user('Lister');
  await api.credit(lister.id, 5);
  const a = await assistant({}, lister.token);
  const b = await assistant({ name: 'Other bot' }, lister.token);
  const ids = [(await start(a.uuid, { type: 'test' }, lister.token)).body.conversation_id, (await start(a.uuid)).body.conversation_id, (await start(b.uuid)).body.conversation_id];
  fake.scriptChat({ text: 'ok' });
  await say(ids[1]!, 'hello');
  const all = await api.request('GET', '/user/conversations', { token: lister.token });
  t.match(all.body, { current_page: 1, per_page: 15, total: 3, from: 1, to: 3, last_page: 1 });
  t.same(all.body.data.map((c: { id: string }) => c.id), [...ids].reverse(), 'newest first');
  const item = all.body.data.find((c: { id: string }) => c.id === ids[1]);
  t.same(Object.keys(item).sort(), ['ai_enabled', 'assistant_id', 'assistant_name', 'created_at', 'id', 'message_count', 'total_cost', 'type', 'updated_at']);
  t.match(item, { assistant_id: a.uuid, assistant_name: 'Shop bot', type: 'widget', message_count: 3, total_cost: 0.01, ai_enabled: true, created_at: /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/ });

  t.equal((await api.request('GET', '/user/conversations?type=test', { token: lister.token })).body.total, 1);
  t.equal((await api.request('GET', `/user/conversations?assistant_id=${b.id}`, { token: lister.token })).body.total, 1);
  const byUuid = await api.request('GET', `/user/conversations?assistant_id=${item.assistant_id}`, { token: lister.token });
  t.same([byUuid.status, byUuid.body.total, byUuid.body.data.map((c: { id: string }) => c.id)], [200, 2, [ids[1], ids[0]]], 'the filter takes the assistant_id the listing returns');
  t.equal((await api.request('GET', `/user/conversations?assistant_id=${b.uuid.toUpperCase()}`, { token: lister.token })).body.total, 1, 'a UUID in capitals too');
  for (const bad of ['abc', '0', '-1', '1.5', '99999999999999999999', `${a.uuid}x`]) {
    const refused = await api.request('GET', `/user/conversations?assistant_id=${bad}`, { token: lister.token });
    t.same([refused.status, refused.body.errors], [422, { assistant_id: ['The selected assistant id is invalid.'] }], bad);
  }
  const today = new Date().toISOString().slice(0, 10);
  t.equal((await api.request('GET', `/user/conversations?date_from=${today}&date_to=${today}`, { token: lister.token })).body.total, 3);
  t.equal((await api.request('GET', '/user/conversations?date_to=2000-01-01', { token: lister.token })).body.total, 0);
  const paged = await api.request('GET', '/user/conversations?per_page=2&page=2&type=widget', { token: lister.token });
  t.match(paged.body, { current_page: 2, per_page: 2, total: 2, from: null, data: [] });
  t.match(paged.body.first_page_url, /\/api\/user\/conversations\?per_page=2&page=1&type=widget$/);

  const foreign = await api.request('GET', `/user/conversations?assistant_id=${a.id}`, { token: stranger.token });
  t.same([foreign.status, foreign.body.errors], [422, { assistant_id: ['The selected assistant id is invalid.'] }]);
  const foreignUuid = await api.request('GET', `/user/conversations?assistant_id=${a.uuid}`, { token: stranger.token });
  t.same([foreignUuid.status, foreignUuid.body.errors], [422, { assistant_id: ['The selected assistant id is invalid.'] }], "another user's assistant by its UUID");
  t.equal((await api.request('GET', '/user/conversations', { token: stranger.token })).body.total, 0, 'another user sees none');
  for (const query of ['per_page=0', 'per_page=101', 'type=telegram', 'date_from=2026-02-30', 'date_to=yesterday', 'page=0', 'date_from=0000-01-01']) {
    t.equal((await api.request('GET', `/user/conversations?${query}`, { token: lister.token })).status, 422, query);
  }

  await api.request('DELETE', `/user/assistant/${b.id}`, { token: lister.token });
  const remaining = await api.request('GET', '/user/conversations', { token: lister.token });
  t.same([remaining.body.total, remaining.body.data.map((c: { id: string }) => c.id)], [2, [ids[1], ids[0]]], 'a deleted assistant\'s conversations are not listed');
});
