/**
 * Protections and fallbacks of conversations:
 * 1. public endpoints are rate limited per client IP and per conversation: 429 {status: false, error}
 *    with Retry-After.
 * 2. a failing model with a configured fallback (chat_llm_fallback_id) falls over to it.
 */
import t from 'tap';
import { startFakeOpenAi } from './fakes/openai.js';
import { startTestPlatform } from './helpers/platform.js';

const fake = await startFakeOpenAi(t);
const providers = { openai: { baseUrl: fake.baseUrl, apiKey: 'k' }, groq: { baseUrl: fake.baseUrl, apiKey: 'g' } };

async function setup(api: Awaited<ReturnType<typeof startTestPlatform>>, extra: Record<string, unknown> = {}) {
  const owner = await api.user();
  await api.credit(owner.id, 5);
  return (await api.assistant(owner.token, extra)).uuid;
}

t.test('rate limits', async (t) => {
  const api = await startTestPlatform(t, { llmProviders: providers, rateLimits: { perIp: { capacity: 4, perMinute: 1 }, perConversation: { capacity: 1, perMinute: 1 } } });
  const uuid = await setup(api);
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
  const uuid = await setup(api, { chat_llm_fallback_id: 4 });
  const conversation = (await api.request('POST', '/conversations', { body: { assistant_id: uuid } })).body.conversation_id;
  fake.scriptChat({ status: 503 }, { status: 503 }, { text: 'Answered by the fallback.' });
  const reply = await api.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'hello' } });
  t.equal(reply.body.message, 'Answered by the fallback.');
  t.equal(fake.requests.at(-1)!.body.model, 'llama-3.3-70b-versatile', 'the fallback model answered');
  t.equal(fake.requests.at(-1)!.headers.authorization, 'Bearer g', 'through its own provider');
});
