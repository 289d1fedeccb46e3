/**
 * Protections and fallbacks of conversations:
 * 1. public endpoints are rate limited per client IP and per conversation: 429 {status: false, error}
 *    with Retry-After.
 * 2. a failing model with a configured fallback (chat_llm_fallback_id) falls over to it.
 * 3. a reply has a deadline (a model holding it is given up); at most eight function calls run per
 *    round, the others answered with an error.
 */
import t from 'tap';
import { startFakeOpenAi } from './fakes/openai.js';
import { startTestPlatform } from './helpers/platform.js';

const fake = await startFakeOpenAi(t);
const providers = { openai: { baseUrl: fake.baseUrl, apiKey: 'k' }, groq: { baseUrl: fake.baseUrl, apiKey: 'g' } };

/** A credited owner and an assistant of theirs: its uuid, and the owner's token. */
async function setup(api: Awaited<ReturnType<typeof startTestPlatform>>, extra: Record<string, unknown> = {}) {
  const owner = await api.user();
  await api.credit(owner.id, 5);
  return { uuid: (await api.assistant(owner.token, extra)).uuid, token: owner.token };
}

t.test('rate limits', async (t) => {
  const api = await startTestPlatform(t, { llmProviders: providers, rateLimits: { perIp: { capacity: 4, perMinute: 1 }, perConversation: { capacity: 1, perMinute: 1 } } });
  const { uuid } = await setup(api);
  const conversation = (await api.request('POST', '/conversations', { body: { assistant_id: uuid } })).body.conversation_id;
  t.equal((await api.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'one' } })).status, 200);
  const perConversation = await api.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'two' } });
  t.equal(perConversation.status, 429);
  t.same(perConversation.body, { status: false, error: 'Too many requests. Please try again later.' });
  t.ok(Number(perConversation.headers.get('retry-after')) >= 1, 'Retry-After says when');
  await api.request('GET', `/conversations/${conversation}`);
  const perIp = await api.request('POST', '/conversations', { body: { assistant_id: uuid } });
  t.equal(perIp.status, 429, 'the client IP ran out');
});

t.test('fallback model', async (t) => {
  const api = await startTestPlatform(t, { llmProviders: providers });
  const { uuid } = await setup(api, { chat_llm_fallback_id: 4 });
  const conversation = (await api.request('POST', '/conversations', { body: { assistant_id: uuid } })).body.conversation_id;
  fake.scriptChat({ status: 503 }, { status: 503 }, { text: 'Answered by the fallback.' });
  const reply = await api.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'hello' } });
  t.equal(reply.body.message, 'Answered by the fallback.');
  t.equal(fake.requests.at(-1)!.body.model, 'llama-3.3-70b-versatile', 'the fallback model answered');
  t.equal(fake.requests.at(-1)!.headers.authorization, 'Bearer g', 'through its own provider');
});

t.test('a reply has a deadline: a model that holds it is given up and the next message is answered', async (t) => {
  const api = await startTestPlatform(t, { llmProviders: providers }, { conversationTurnMs: 2_000 });
  const { uuid, token } = await setup(api, { llm_model_id: 1 });
  const conversation = (await api.request('POST', '/conversations', { body: { assistant_id: uuid } })).body.conversation_id;
  let release!: () => void;
  t.teardown(() => release());
  fake.scriptChat({ text: 'Too late.', heldUntil: new Promise<void>((resolve) => (release = resolve)) });
  // The owner's token: the reason of the failure is theirs to read.
  const late = await api.request('POST', `/conversations/${conversation}/messages`, { token, body: { message: 'Hello?' } });
  t.same([late.status, late.body], [502, { status: false, error: 'Failed to process message: the reply was not done within 2 s' }]);
  fake.scriptChat({ text: 'Here now.' });
  t.match((await api.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'Again?' } })).body, { status: true, message: 'Here now.' }, 'the next message is answered');
});

t.test('at most eight function calls run in one round; the rest are answered with an error', async (t) => {
  const api = await startTestPlatform(t, { llmProviders: providers, outboundAllowPrivate: true });
  const { startSite } = await import('./helpers/site.js');
  const site = await startSite(t);
  let runs = 0;
  site.route('/count', () => (runs++, { type: 'application/json', body: '{"ok":true}' }));
  const owner = await api.user();
  await api.credit(owner.id, 5);
  const tool = await api.request('POST', '/user/tools', { token: owner.token, body: { name: 'count_up', description: 'Counts up', endpoint: `${site.origin}/count`, method: 'GET', schema: [] } });
  const bot = await api.assistant(owner.token, { llm_model_id: 1, tool_ids: [tool.body.data.id] });
  const conversation = (await api.request('POST', '/conversations', { body: { assistant_id: bot.uuid } })).body.conversation_id;
  fake.scriptChat({ toolCalls: Array.from({ length: 10 }, () => ({ name: 'count_up', arguments: {} })) }, { text: 'Counted.' });
  const reply = await api.request('POST', `/conversations/${conversation}/messages`, { token: owner.token, body: { message: 'Count!' } });
  t.equal(reply.body.message, 'Counted.');
  t.equal(runs, 8);
  t.same(reply.body.function_calls.slice(7).map((c: { result: unknown }) => c.result), [{ ok: true }, { error: 'Only 8 functions run per round; this call was not run.' }, { error: 'Only 8 functions run per round; this call was not run.' }]);
  const answered = fake.requests.at(-1)!.body.messages.filter((m: { role: string }) => m.role === 'tool');
  t.equal(answered.length, 10, 'the model gets an answer for every call');
});

t.test('behind a trusted proxy, the per-IP limit counts each forwarded client apart', async (t) => {
  const api = await startTestPlatform(t, { llmProviders: providers, trustProxy: 1, rateLimits: { perIp: { capacity: 2, perMinute: 1 }, perConversation: { capacity: 10, perMinute: 10 } } });
  const { uuid } = await setup(api);
  const create = (client: string) => api.request('POST', '/conversations', { body: { assistant_id: uuid }, headers: { 'x-forwarded-for': client } });
  t.same([(await create('203.0.113.7')).status, (await create('203.0.113.7')).status, (await create('203.0.113.7')).status], [200, 200, 429]);
  t.equal((await create('198.51.100.9')).status, 200, 'another client behind the same proxy has its own budget');
});
