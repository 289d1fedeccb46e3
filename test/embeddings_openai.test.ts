/**
 * The OpenAI-compatible embedder, against a local fake speaking the wire format:
 * 1. POST {base}/embeddings with model, input and the bearer key; vectors put back in input order
 *    and L2-normalised; inputs batched.
 * 2. 429 and 5xx are retryable failures, other statuses are not.
 * 3. A platform configured with EMBEDDINGS_BASE_URL ingests and searches with the remote vectors.
 */
import t from 'tap';
import { createOpenAiEmbedder } from '../runtime/knowledge/embedder.js';
import { embedLocal } from '../workers/embed.js';
import { startFakeOpenAi } from './fakes/openai.js';
import { startTestPlatform } from './helpers/platform.js';

const fake = await startFakeOpenAi(t);

t.test('wire format and normalisation', async (t) => {
  const embedder = createOpenAiEmbedder({ baseUrl: fake.baseUrl, apiKey: 'sk-test', model: 'text-embedding-3-small', batchSize: 2 });
  t.equal(embedder.model, 'openai:text-embedding-3-small');
  const vectors = await embedder.embed(['alpha', 'beta', 'gamma']);
  t.equal(fake.requests.length, 2, 'batched by two');
  t.same(fake.requests[0]!.body, { model: 'text-embedding-3-small', input: ['alpha', 'beta'] });
  t.equal(fake.requests[0]!.headers.authorization, 'Bearer sk-test');
  const expected = embedLocal('beta');
  t.ok(vectors[1]!.every((v, i) => Math.abs(v - expected[i]!) < 1e-6), 'order restored and normalised');
});

t.test('failures', async (t) => {
  const embedder = createOpenAiEmbedder({ baseUrl: fake.baseUrl, apiKey: undefined, model: 'm' });
  fake.failNext(429);
  await t.rejects(embedder.embed(['x']), { name: 'EmbeddingError', retryable: true });
  fake.failNext(503);
  await t.rejects(embedder.embed(['x']), { name: 'EmbeddingError', retryable: true });
  fake.failNext(400);
  await t.rejects(embedder.embed(['x']), { name: 'EmbeddingError', retryable: false, message: /answered 400/ });
  const down = createOpenAiEmbedder({ baseUrl: 'http://127.0.0.1:9/v1', apiKey: undefined, model: 'm', timeoutMs: 1000 });
  await t.rejects(down.embed(['x']), { name: 'EmbeddingError', retryable: true, message: /could not be reached/ });
});

t.test('the platform ingests with remote embeddings', async (t) => {
  const api = await startTestPlatform(t, { embeddings: { baseUrl: fake.baseUrl, apiKey: 'sk-test', model: 'text-embedding-3-small' } });
  const user = await api.user();
  const kb = (await api.request('POST', '/user/knowledgebases', { token: user.token, body: { name: 'Remote' } })).body.data.id;
  const form = new FormData();
  form.set('name', 'Notes');
  form.set('type', 'txt');
  form.set('file', new Blob(['Our returns desk is on the second floor.\n\nParking is free on Sundays.']), 'notes.txt');
  const created = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: user.token, raw: form });
  await api.platform.runtime.settled();
  t.equal((await api.request('GET', `/user/knowledgebases/${kb}/documents/${created.body.data.id}`, { token: user.token })).body.data.status, 'active');
  const before = fake.requests.length;
  const found = await api.request('POST', `/user/knowledgebases/${kb}/search`, { token: user.token, body: { query: 'where is the returns desk' } });
  t.match(found.body.data[0], { content: /second floor/ });
  t.equal(fake.requests.length, before + 1, 'the query was embedded remotely');
});
