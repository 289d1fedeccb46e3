/**
 * URLs the outbound guard refuses, at the API and in the log (names are answered by a stand-in
 * resolver; nothing leaves loopback):
 * 1. a tool whose endpoint the guard would refuse (private and reserved addresses in any spelling,
 *    localhost names, a name with a private address among its answers) is neither created nor
 *    updated: 422 {message, errors: {endpoint: [...]}}. A public name, a name that does not
 *    resolve and an OUTBOUND_ALLOW_HOSTS host are accepted.
 * 2. the same for an assistant's webhook_url, on create, update and enable-webhook; another user's
 *    assistant is 404 before its URL is looked at.
 * 3. a tool whose name resolves to loopback by the time it is called: the call is refused and
 *    logged (warn, the owner's and the tool's ids, the reason), with no path, query or header.
 * 4. a webhook whose name resolves to loopback by the time it is delivered: refused and logged with
 *    the owner's, the assistant's and the delivery's ids.
 * 5. a website document on a loopback address: the crawl is refused and logged once with the
 *    owner's, the knowledgebase's and the document's ids.
 */
import t from 'tap';
import { startFakeOpenAi } from './fakes/openai.js';
import { MINIMAL_ASSISTANT } from './helpers/platform.js';
import { fakeResolver } from './helpers/resolver.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

const ENDPOINT_REFUSED = 'The endpoint must not point to a private, loopback or reserved address.';
const WEBHOOK_REFUSED = 'The webhook url must not point to a private, loopback or reserved address.';
const PUBLIC = '93.184.216.34';

const fake = await startFakeOpenAi(t);
const resolver = fakeResolver({ 'public.example': [PUBLIC], 'mixed.example': [PUBLIC, '10.0.0.5'], 'crm.internal': ['10.0.0.7'], 'hooks.example': [PUBLIC] });
const lines: Array<Record<string, any>> = [];
const waiting: Array<{ match: (line: Record<string, any>) => boolean; resolve: (line: Record<string, any>) => void }> = [];
const s = await voiceSetup(
  t,
  { is_webhook_active: true, webhook_url: 'http://hooks.example/hook', send_webhook_only_on_completed: false },
  {
    config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } }, outboundAllowHosts: ['crm.internal'] },
    runtime: { lookup: resolver },
    logTo: (line) => {
      lines.push(line);
      for (const waiter of waiting.filter((w) => w.match(line))) waiter.resolve(line);
    },
  },
);
const { api, token } = s;

/** The first log line (already written, or the next) that matches. */
function logged(match: (line: Record<string, any>) => boolean): Promise<Record<string, any>> {
  const seen = lines.find(match);
  return seen ? Promise.resolve(seen) : new Promise((resolve) => waiting.push({ match, resolve }));
}

const REFUSED_URLS = [
  'http://127.0.0.1:9/orders',
  'http://10.0.0.1/orders',
  'http://169.254.169.254/latest/meta-data/',
  'http://2130706433/orders',
  'http://0x7f.1/orders',
  'http://[::1]/orders',
  'http://[::ffff:127.0.0.1]/orders',
  'http://[::7f00:1]/orders',
  'http://[2002:a00:1::]/orders',
  'http://[64:ff9b:1::a00:1]/orders',
  'http://[2001::1]/orders',
  'http://localhost:8080/orders',
  'http://api.localhost/orders',
  'https://mixed.example/orders',
];

const tool = (endpoint: string, name = 'check_order') => ({ name, description: 'Looks up an order', endpoint, method: 'GET', schema: [{ name: 'order_id', type: 'string', description: 'The order id' }] });

t.test('a tool endpoint the guard refuses is a 422 on endpoint', async (t) => {
  for (const endpoint of REFUSED_URLS) {
    const created = await api.request('POST', '/user/tools', { token, body: tool(endpoint) });
    t.same([created.status, created.body], [422, { message: ENDPOINT_REFUSED, errors: { endpoint: [ENDPOINT_REFUSED] } }], `${endpoint} refused`);
  }
  t.same((await api.request('GET', '/user/tools', { token })).body.data, [], 'nothing stored');

  const accepted = await api.request('POST', '/user/tools', { token, body: tool('https://public.example/orders', 'public_one') });
  t.equal(accepted.status, 201, 'a name with public addresses');
  t.equal((await api.request('POST', '/user/tools', { token, body: tool('https://not-yet.example/orders', 'not_resolving') })).status, 201, 'a name that does not resolve (checked again when called)');
  t.equal((await api.request('POST', '/user/tools', { token, body: tool('https://crm.internal/orders', 'internal_crm') })).status, 201, 'an OUTBOUND_ALLOW_HOSTS host, though private');

  const id = accepted.body.data.id;
  const updated = await api.request('PUT', `/user/tools/${id}`, { token, body: { endpoint: 'http://[::ffff:a9fe:a9fe]/latest' } });
  t.same([updated.status, updated.body], [422, { message: 'Validation failed', errors: { endpoint: [ENDPOINT_REFUSED] } }]);
  t.equal((await api.request('GET', `/user/tools/${id}`, { token })).body.data.endpoint, 'https://public.example/orders', 'unchanged');
  t.equal((await api.request('PUT', `/user/tools/${id}`, { token, body: { description: 'Still here' } })).status, 200, 'other fields change without the endpoint');
  for (const created of (await api.request('GET', '/user/tools', { token })).body.data) await api.request('DELETE', `/user/tools/${created.id}`, { token });
});

t.test('a webhook URL the guard refuses is a 422 on webhook_url', async (t) => {
  for (const url of REFUSED_URLS) {
    const created = await api.request('POST', '/user/assistant', { token, body: { ...MINIMAL_ASSISTANT, is_webhook_active: true, webhook_url: url } });
    t.same([created.status, created.body], [422, { message: 'Validation failed', errors: { webhook_url: [WEBHOOK_REFUSED] } }], `${url} refused on create`);
  }
  const both = await api.request('POST', '/user/assistant', { token, body: { ...MINIMAL_ASSISTANT, knowledgebase_id: 999_999, webhook_url: 'http://127.0.0.1/hook' } });
  t.same(Object.keys(both.body.errors).sort(), ['knowledgebase_id', 'webhook_url'], 'reported with the other failing fields');

  const { id } = await api.assistant(token, { is_webhook_active: true, webhook_url: 'https://public.example/hook' });
  const updated = await api.request('PUT', `/user/assistant/${id}`, { token, body: { webhook_url: 'http://[2002:7f00:1::]/hook' } });
  t.same([updated.status, updated.body], [422, { message: 'Validation failed', errors: { webhook_url: [WEBHOOK_REFUSED] } }], 'refused on update');
  const enabled = await api.request('POST', '/user/assistants/enable-webhook', { token, body: { assistant_id: id, webhook_url: 'http://localhost/hook' } });
  t.same([enabled.status, enabled.body], [422, { message: 'The given data was invalid.', errors: { webhook_url: [WEBHOOK_REFUSED] } }], 'refused on enable-webhook');
  t.equal((await api.request('GET', `/user/assistant/${id}`, { token })).body.data.webhook_url, 'https://public.example/hook', 'unchanged');

  const stranger = await api.user('Stranger');
  t.equal((await api.request('POST', '/user/assistants/enable-webhook', { token: stranger.token, body: { assistant_id: id, webhook_url: 'http://localhost/hook' } })).status, 404, "another user's assistant: 404 first");
  t.equal((await api.request('POST', '/user/assistants/enable-webhook', { token, body: { assistant_id: id, webhook_url: 'https://crm.internal/hook' } })).status, 200, 'an OUTBOUND_ALLOW_HOSTS host is accepted');
  t.equal((await api.request('PUT', `/user/assistant/${id}`, { token, body: { webhook_url: 'https://not-yet.example/hook' } })).status, 200, 'a name that does not resolve is accepted');
});

t.test('a tool refused when it is called is logged with its owner and id', async (t) => {
  const created = await api.request('POST', '/user/tools', { token, body: { ...tool('http://crm.example/orders'), headers: [{ name: 'X-Api-Key', value: 'tool-secret' }] } });
  t.equal(created.status, 201, 'crm.example does not resolve yet');
  resolver.answers['crm.example'] = [PUBLIC, '127.0.0.1'];
  const bot = await api.assistant(token, { name: 'Shop', tool_ids: [created.body.data.id] });
  const conversation = (await api.request('POST', '/conversations', { token, body: { assistant_id: bot.uuid, type: 'api' } })).body.conversation_id;
  fake.scriptChat({ toolCalls: [{ name: 'check_order', arguments: { order_id: 'A-17-private' } }] }, { text: 'I could not look it up.' });
  const reply = await api.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'Where is order A-17-private?' } });
  t.equal(reply.body.message, 'I could not look it up.');
  const line = lines.find((l) => l.msg === 'outbound request refused' && l.toolId === created.body.data.id);
  t.same(line, { level: 40, time: line?.time, component: 'outbound', userId: s.userId, toolId: created.body.data.id, host: 'crm.example', address: '127.0.0.1', reason: 'reserved address', msg: 'outbound request refused' });
  t.notMatch(JSON.stringify(lines), /A-17-private|tool-secret|\/orders/, 'no path, query or header of the tool in the log');
});

t.test('a webhook refused when it is delivered is logged with its owner, assistant and delivery', async (t) => {
  resolver.answers['hooks.example'] = ['127.0.0.1'];
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  phone.phone.hangUp();
  await endedCall(s, callId);
  const delivery = (await api.request('GET', `/user/webhook-deliveries?call_id=${callId}`, { token })).body.data[0];
  // The attempt is logged once it is recorded, after the refusal.
  await logged((l) => l.msg === 'webhook attempt' && l.deliveryId === delivery.delivery_id);
  const line = lines.find((l) => l.msg === 'outbound request refused' && l.deliveryId === delivery.delivery_id);
  t.same(line, { level: 40, time: line?.time, component: 'outbound', userId: s.userId, assistantId: s.assistantId, deliveryId: delivery.delivery_id, host: 'hooks.example', address: '127.0.0.1', reason: 'reserved address', msg: 'outbound request refused' });
});

t.test('a crawl refused is logged once with its owner, knowledgebase and document', async (t) => {
  const kb = (await api.request('POST', '/user/knowledgebases', { token, body: { name: 'Docs' } })).body.data.id;
  const document = (await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token, body: { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/private?key=doc-secret' } })).body.data.id;
  await logged((l) => l.msg === 'document failed' && l.documentId === document);
  const refused = lines.filter((l) => l.msg === 'outbound request refused' && l.documentId === document);
  t.same(refused, [{ level: 40, time: refused[0]?.time, component: 'outbound', userId: s.userId, knowledgebaseId: kb, documentId: document, host: '127.0.0.1', address: '127.0.0.1', reason: 'reserved address', msg: 'outbound request refused' }]);
  t.notMatch(JSON.stringify(refused), /doc-secret|private/, 'no path or query');
});
