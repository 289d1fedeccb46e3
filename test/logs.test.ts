/**
 * The log (pino JSON lines):
 * 1. one line per request with its request id (the caller's X-Request-Id, or one made and sent
 *    back in that header), method, route, status and the user it authenticated;
 * 2. one line per status change of a call, with the call id, its owner and the id of the request
 *    that began it;
 * 3. no line names a field twice (a call's logger already carries its ids: a line adding them
 *    again would repeat them, and readers keep either one);
 * 4. every line's time is an ISO 8601 UTC string;
 * 5. no line holds a password, a session or API key token, the operator or metrics token, or a
 *    call's media stream token, whatever the requests carried.
 */
import t from 'tap';
import { createLoopbackCarrier, type LoopbackDial } from '../runtime/calls/carriers/loopback.js';
import { SimulatedPhone } from './helpers/phone.js';
import { ADMIN_TOKEN } from './helpers/platform.js';
import { endedCall, voiceSetup } from './helpers/voice.js';

const METRICS_TOKEN = 'metrics-scrape-token-42';

/** The top-level fields a JSON object line names more than once (JSON.parse keeps only the last). */
function repeatedFields(raw: string): string[] {
  const seen = new Set<string>();
  const repeated: string[] = [];
  let depth = 0;
  for (let i = 0; i < raw.length; i++) {
    const char = raw[i];
    if (char === '{' || char === '[') depth++;
    else if (char === '}' || char === ']') depth--;
    else if (char === '"') {
      let end = i + 1;
      while (raw[end] !== '"') end += raw[end] === '\\' ? 2 : 1;
      const name = raw.slice(i + 1, end);
      i = end;
      if (depth !== 1 || raw[end + 1] !== ':') continue;
      if (seen.has(name)) repeated.push(name);
      seen.add(name);
    }
  }
  return repeated;
}

const PASSWORD = 'correct horse battery';

t.test('requests and calls are logged with their ids, secrets never', async (t) => {
  const lines: Array<Record<string, any>> = [];
  const raw: string[] = [];
  const dialed: LoopbackDial[] = [];
  const s = await voiceSetup(t, { type: 'outbound' }, { config: { metricsToken: METRICS_TOKEN }, runtime: { carrier: createLoopbackCarrier((call) => dialed.push(call)) }, logTo: (line, written) => (lines.push(line), raw.push(written)) });

  const key = (await s.api.request('POST', '/user/api-keys', { token: s.token, body: { name: 'ci' } })).body.api_key.token as string;
  const me = await s.api.request('GET', '/user', { token: key });
  t.equal(me.status, 200);
  t.equal((await s.api.request('GET', '//metrics', { token: METRICS_TOKEN })).status, 200);
  t.equal((await s.api.request('POST', '/auth/login', { body: { email: 'nobody@example.com', password: PASSWORD } })).status, 401);

  const placed = await s.api.request('POST', '/user/calls', { token: s.token, headers: { 'x-request-id': 'place-call-1' }, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } });
  t.equal(placed.status, 201);
  t.equal(placed.headers.get('x-request-id'), 'place-call-1', 'the request id is sent back');
  const callId = placed.body.data.id as number;
  await new Promise((resolve) => setImmediate(resolve));
  s.scripts.set(callId, ['Hello?']);
  const phone = await SimulatedPhone.dial(dialed[0]!.streamUrl, dialed[0]!.carrierCallId, { call_id: String(callId), token: dialed[0]!.token }, s.clock);
  await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
  phone.phone.hangUp();
  await endedCall(s, callId);

  const requests = lines.filter((line) => line.msg === 'request');
  t.match(
    requests.find((line) => line.reqId === 'place-call-1'),
    { level: 30, method: 'POST', path: '/api/user/calls', route: '/api/user/calls', status: 201, userId: s.userId, ms: Number },
    'the request line carries the id the caller gave',
  );
  t.ok(lines.length > 0 && lines.every((line) => typeof line.time === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(line.time as string)), 'every time is an ISO 8601 UTC string');
  const keyed = requests.find((line) => line.path === '/api/user' && line.status === 200);
  t.match(keyed, { method: 'GET', userId: s.userId, reqId: me.headers.get('x-request-id') }, 'a made request id is the one sent back');
  t.match(keyed!.reqId, /^[0-9a-f-]{36}$/);
  t.ok(requests.some((line) => line.path === '/metrics' && line.status === 200), 'every request has its line');

  const statuses = lines.filter((line) => line.msg === 'call status' && line.callId === callId);
  t.same(statuses.map((line) => line.status), ['in-progress', 'ended_by_customer'], 'each change once, in order (the loopback carrier reports no ringing)');
  t.ok(statuses.every((line) => line.userId === s.userId && line.reqId === 'place-call-1'), 'each with its owner and the request that placed it');

  t.same(repeatedFields('{"a":1,"b":{"a":2},"c":"x\\"a\\":","b":3}'), ['b'], 'a repeated field is seen, nested and quoted ones are not');
  t.same(raw.filter((line) => repeatedFields(line).length > 0), [], 'no line names a field twice');

  const text = lines.map((line) => JSON.stringify(line)).join('\n');
  for (const [name, secret] of Object.entries({ password: PASSWORD, session: s.token, apiKey: key, admin: ADMIN_TOKEN, metrics: METRICS_TOKEN, stream: dialed[0]!.token })) {
    t.notOk(text.includes(secret), `no ${name} token in the log`);
  }
});
