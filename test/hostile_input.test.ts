/**
 * Bad input never breaks the server: every operation of the OpenAPI document is called with
 * hostile path ids, query values and body fields (one field at a time over an otherwise valid body,
 * so each value also reaches the code behind validation) and with malformed raw bodies, and no
 * answer is a 500 or anything but the documented JSON shapes; the server still answers afterwards.
 * Every operation that needs a bearer token answers 401 without a valid one, before it looks at
 * the path or body.
 */
import t from 'tap';
import { ADMIN_TOKEN, MINIMAL_ASSISTANT, startTestPlatform } from './helpers/platform.js';
import { withClient } from './helpers/database.js';

// Loopback tool and webhook URLs are allowed here: the sweep is about input, the guard has its own tests.
const api = await startTestPlatform(t, {
  outboundAllowPrivate: true,
  // The carriers' webhooks unsigned, so hostile fields reach their handlers (see carrierForms).
  acceptUnsignedCarrierWebhooks: true,
  rateLimits: { perIp: { capacity: 1e9, perMinute: 1e9 }, perConversation: { capacity: 1e9, perMinute: 1e9 } },
});
const owner = await api.user('Owner');
await withClient(api.databaseUrl, (db) => db.query(`UPDATE users SET plan = 'pro' WHERE id = $1`, [owner.id]));
await api.credit(owner.id, 1000);
const number = await api.phoneNumber(owner.token);
const assistant = await api.assistant(owner.token, { type: 'inbound', phone_number_id: number.id });
const outbound = await api.assistant(owner.token);
const kb = (await api.request('POST', '/user/knowledgebases', { token: owner.token, body: { name: 'FAQ' } })).body.data.id as number;
const tool = {
  name: 'check_order',
  description: 'Looks up an order',
  endpoint: 'http://127.0.0.1:9/orders',
  method: 'GET',
  timeout: 5,
  schema: [{ name: 'order_id', type: 'string', description: 'The order id' }],
};
const toolId = (await api.request('POST', '/user/tools', { token: owner.token, body: tool })).body.data.id as number;
const conversation = (await api.request('POST', '/conversations', { token: owner.token, body: { assistant_id: assistant.uuid, type: 'test' } })).body.conversation_id as string;

/** A valid body per operation, so a hostile field is the only thing wrong with it. */
const validBodies: Record<string, Record<string, unknown>> = {
  'POST /api/auth/register': { name: 'N', email: 'hostile@example.com', password: 'correct horse battery' },
  'POST /api/auth/login': { email: owner.email, password: 'correct horse battery' },
  'POST /api/user/api-keys': { name: 'key' },
  'POST /api/user/knowledgebases': { name: 'KB' },
  'POST /api/user/knowledgebases/{id}/documents': { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/' },
  'POST /api/user/knowledgebases/{id}/search': { query: 'refund' },
  'POST /api/user/tools': tool,
  'POST /api/user/assistant': MINIMAL_ASSISTANT,
  'POST /api/user/assistants/disable-webhook': { assistant_id: outbound.id },
  'POST /api/user/assistants/enable-webhook': { assistant_id: outbound.id, webhook_url: 'http://127.0.0.1:9/hook' },
  'POST /api/user/phone-numbers/purchase': { phone_number: '+14155550100' },
  'POST /api/user/phone-numbers/caller-id': { phone_number: '+14155550100' },
  'POST /api/conversations': { assistant_id: assistant.uuid, type: 'test' },
  'POST /api/conversations/{id}/messages': { message: 'hi' },
  'PATCH /api/user/conversations/{id}': { ai_enabled: true },
  'POST /api/user/calls': { assistant_id: outbound.id, phone_number: '+14155550100' },
  'POST /api/web-calls': { assistant_id: assistant.uuid },
};
/** Operations that would end the session the sweep runs with. */
const skipped = new Set(['POST /api/auth/logout']);

const hostileValues: unknown[] = [
  null, '', ' ', 'x', '0', -1, 0, 1.5, 1e300, -1e300, true, [], [null], [[]], {}, { a: { b: [1] } },
  'x'.repeat(20_000), '\u0000', "1'; DROP TABLE users; --", '{{system_prompt}}', '../../etc/passwd', '2026-02-30', '+1', 9007199254740993,
];
const hostileStrings = ['', 'abc', '-1', '0', '1.5', '1e309', '99999999999999999999', '%00', 'a'.repeat(5000), '2026-13-45', '[]', "'", '00000000-0000-0000-0000-000000000000'];
const hostileIds = ['abc', '0', '-1', '99999999999999999999', '1e3', '%20', "'", '00000000-0000-0000-0000-000000000000', '-'.repeat(36), 'f'.repeat(36)];

function realId(path: string, name: string): string {
  if (path.includes('/conversations/')) return conversation;
  if (path.includes('/knowledgebases/') && name === 'id') return String(kb);
  if (path.includes('/tools/')) return String(toolId);
  if (path.includes('/assistant/')) return String(outbound.id);
  if (path.includes('/phone-numbers/')) return String(number.id);
  if (path.includes('/widget/')) return assistant.uuid;
  if (path.includes('/admin/users/')) return String(owner.id);
  return '1';
}

interface Probe {
  readonly label: string;
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
  /** Sent as is with this content type instead of a JSON body. */
  readonly raw?: { readonly type: string; readonly text: string };
}

const rawBodies = [
  { type: 'application/json', text: '{"name":' },
  { type: 'application/json', text: '{"name":"\\u0000"}' },
  { type: 'application/json', text: '[' + '['.repeat(5000) },
  { type: 'text/plain', text: 'name=x' },
  { type: 'application/x-www-form-urlencoded', text: 'name=%00&type[]=x' },
  { type: 'multipart/form-data; boundary=x', text: '--x\r\nContent-Disposition: form-data; name="name"\r\n\r\nx' },
];

/** The carriers' form fields, over a valid call to the owner's number (no TWILIO_AUTH_TOKEN, TELNYX_PUBLIC_KEY, VONAGE_SIGNATURE_SECRET nor PLIVO_AUTH_TOKEN, and ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: unsigned requests are taken). */
const carrierForms: Record<string, Record<string, string>> = {
  'POST /api/telephony/twilio/inbound': { To: number.number, From: '+14155550199', CallSid: `CA${'0'.repeat(32)}` },
  'POST /api/telephony/twilio/status': { CallSid: `CA${'0'.repeat(32)}`, CallStatus: 'completed', AnsweredBy: 'human' },
  'POST /api/telephony/telnyx/inbound': { To: number.number, From: '+14155550199', CallSid: 'v3:0000-telnyx' },
  'POST /api/telephony/telnyx/status': { CallSid: 'v3:0000-telnyx', CallStatus: 'completed', AnsweredBy: 'machine_end_beep' },
  // Vonage posts JSON; a form body reaches the same fields.
  'POST /api/telephony/vonage/inbound': { to: number.number.slice(1), from: '14155550199', uuid: '00000000-vonage' },
  'POST /api/telephony/vonage/status': { uuid: '00000000-vonage', status: 'machine' },
  'POST /api/telephony/plivo/inbound': { To: number.number.slice(1), From: '14155550199', CallUUID: '00000000-0000-4000-8000-000000000000' },
  'POST /api/telephony/plivo/status': { CallUUID: '00000000-0000-4000-8000-000000000000', CallStatus: 'completed', Machine: 'false' },
};
const hostileFormValues = ['', '\u0000', 'x'.repeat(20_000), '+1', "1'; DROP TABLE calls; --", '%00', 'completed\u0000'];

const doc = (await api.request('GET', '/openapi.json')).body as {
  paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }>; requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> } }>>;
};

const probes: Probe[] = [];
for (const [template, operations] of Object.entries(doc.paths)) {
  for (const [verb, operation] of Object.entries(operations)) {
    const method = verb.toUpperCase();
    const key = `${method} ${template}`;
    if (skipped.has(key)) continue;
    const pathParams = (operation.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
    const query = (operation.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
    const fill = (override?: { name: string; value: string }) =>
      template.replace(/\{([A-Za-z]+)\}/g, (_, name: string) => encodeURIComponent(override?.name === name ? override.value : realId(template, name)));
    for (const name of pathParams) for (const value of hostileIds) probes.push({ label: `${key} ${name}=${value.slice(0, 20)}`, method, path: fill({ name, value }) });
    for (const name of query) {
      for (const value of hostileStrings) probes.push({ label: `${key} ?${name}=${value.slice(0, 20)}`, method, path: `${fill()}?${name}=${encodeURIComponent(value)}` });
    }
    const form = carrierForms[key];
    for (const [field, valid] of Object.entries(form ?? {})) {
      for (const value of [...hostileFormValues, valid]) {
        const text = new URLSearchParams({ ...form, [field]: value }).toString();
        for (const suffix of ['', '?call_id=1', '?call_id=99999999999999999999']) {
          probes.push({ label: `${key}${suffix} ${field}=${JSON.stringify(value).slice(0, 20)}`, method, path: `${fill()}${suffix}`, raw: { type: 'application/x-www-form-urlencoded', text } });
        }
      }
    }
    const properties = operation.requestBody?.content['application/json']?.schema.properties;
    if (!properties) continue;
    const base = validBodies[key] ?? {};
    for (const raw of [null, [], 'text', 42]) probes.push({ label: `${key} body=${JSON.stringify(raw)}`, method, path: fill(), body: raw });
    for (const raw of rawBodies) probes.push({ label: `${key} raw ${raw.type} ${raw.text.slice(0, 20)}`, method, path: fill(), raw });
    for (const field of Object.keys(properties)) {
      for (const value of hostileValues) probes.push({ label: `${key} ${field}=${JSON.stringify(value)?.slice(0, 30)}`, method, path: fill(), body: { ...base, [field]: value } });
    }
  }
}

t.test('every operation that needs a token is 401 without one, or with a wrong one, before anything else', async (t) => {
  let checked = 0;
  for (const [template, operations] of Object.entries(doc.paths)) {
    for (const [verb, operation] of Object.entries(operations) as Array<[string, { security?: Array<Record<string, unknown>> }]>) {
      // Operations whose token is optional (`{}` among the schemes: the public conversation ones) answer without one.
      if (!operation.security?.some((scheme) => 'bearer' in scheme) || operation.security.some((scheme) => Object.keys(scheme).length === 0)) continue;
      const path = template.replace(/\{[A-Za-z]+\}/g, 'abc').slice(4);
      const method = verb.toUpperCase();
      for (const token of [undefined, 'wrong', ADMIN_TOKEN]) {
        const result = await api.request(method, path, { token, body: method === 'GET' ? undefined : { name: 'x'.repeat(300) } });
        t.same([result.status, result.body], [401, { message: 'Unauthenticated.' }], `${method} ${template} with ${token === undefined ? 'no' : 'a wrong'} token`);
        if (method === 'GET') continue;
        const malformed = await api.request(method, path, { token, raw: '{"name":', headers: { 'content-type': 'application/json' } });
        t.same([malformed.status, malformed.body], [401, { message: 'Unauthenticated.' }], `${method} ${template}: 401 before the malformed body`);
      }
      checked++;
    }
  }
  t.ok(checked > 40, `${checked} operations`);
  const upload = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { raw: new Uint8Array(30 * 1024 * 1024), headers: { 'content-type': 'multipart/form-data; boundary=x' } });
  t.same([upload.status, upload.body], [401, { message: 'Unauthenticated.' }], 'an anonymous upload over the size limit is refused as unauthenticated, its body not kept');
});

t.test('no hostile input gets a 500', async (t) => {
  t.ok(probes.length > 2000, `${probes.length} requests`);
  const failures: string[] = [];
  let next = 0;
  async function worker(): Promise<void> {
    while (next < probes.length) {
      const probe = probes[next++]!;
      const token = probe.path.includes('/admin/') ? ADMIN_TOKEN : owner.token;
      const path = probe.path.startsWith('/api/') ? probe.path.slice(4) : `/${probe.path}`;
      const result = await api.request(probe.method, path, probe.raw ? { token, raw: probe.raw.text, headers: { 'content-type': probe.raw.type } } : { token, body: probe.body });
      const json = (result.headers.get('content-type') ?? '').includes('application/json');
      if (result.status >= 500 && result.status !== 502 && result.status !== 503) failures.push(`${result.status} ${probe.label}: ${JSON.stringify(result.body).slice(0, 200)}`);
      else if (probe.path.startsWith('/api/') && result.status >= 400 && !json) failures.push(`${result.status} without JSON ${probe.label}`);
    }
  }
  await Promise.all(Array.from({ length: 8 }, worker));
  t.same(failures, [], 'every answer is a documented client error or success');
  t.equal((await api.request('GET', '//health')).status, 200, 'the server still answers');
});
