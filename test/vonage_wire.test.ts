/**
 * Vonage's wire formats, each part alone (the calls themselves run in calls_carriers.test.ts):
 * 1. The media serializer: `websocket:connected` claims the call with the headers' id and token;
 *    binary 640-byte messages are 20 ms of 16 kHz PCM16, copied out of the socket's buffer; the
 *    agent's frames go out as 640 binary bytes; marks are `notify` and come back as
 *    `websocket:notify`; a barge-in is `clear`; DTMF; junk is ignored; a normal close is a hang-up.
 * 2. NCCOs: the stream (`connect` to the websocket with the id and token in its headers), a
 *    refusal (`talk`, then the NCCO ends the call), a hang-up (empty), a transfer.
 * 3. Signed webhooks: HS256 with the signature secret over this very payload (the body of a POST,
 *    the query's fields as JSON for a GET), recent, for this application; anything else refused.
 * 4. The webhook routes, over a recording stand-in for the call service: the answer webhook as a
 *    GET (query) and as a POST (JSON), numbers given their `+`; every event status and both
 *    verdicts in the platform's words; events naming no call (an inbound call's) change nothing;
 *    without a signature secret unsigned webhooks are refused, or taken when the operator accepts them.
 * 5. The Voice API adapter against the fake: every request carries an application JWT (RS256)
 *    the fake verifies; create, transfer, hang-up bodies; a refusal is a CarrierError with the detail.
 * 6. Settings: VONAGE_APPLICATION_ID and VONAGE_PRIVATE_KEY together (PEM text, PEM with escaped
 *    line breaks, or a file path), VONAGE_API_URL, VONAGE_SIGNATURE_SECRET (required with them
 *    unless ACCEPT_UNSIGNED_CARRIER_WEBHOOKS); a bad key names the variable without echoing the value.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { ApiRequest, RouteDefinition } from '../api/http/types.js';
import { vonageRoutes, vonageSigned } from '../api/routes/carriers/vonage.js';
import type { VoiceService } from '../runtime/calls/live.js';
import { bareNumber, plusNumber } from '../runtime/calls/carriers/rest.js';
import { createVonageCarrier, nccoAnswer, transferNcco } from '../runtime/calls/carriers/vonage.js';
import { ConfigError, loadConfig } from '../runtime/config.js';
import { FRAME_SAMPLES } from '../runtime/voice/audio.js';
import { vonageFormat } from '../runtime/voice/serializers/vonage.js';
import { hs256, startFakeVonage } from './fakes/vonage.js';

/** A text message as uWS hands it over: an ArrayBuffer of exactly its bytes. */
const bytes = (value: string) => new TextEncoder().encode(value).buffer as ArrayBuffer;
const text = (value: unknown) => bytes(JSON.stringify(value));

t.test('the media serializer', async (t) => {
  const codec = vonageFormat.codec();
  t.equal(vonageFormat.claim, 'start', 'the call is named in the first message, not the URL');
  t.same(codec.decode(text({ event: 'websocket:connected', 'content-type': 'audio/l16;rate=16000', call_id: '42', token: 'secret' }), false), { type: 'start', callId: 42, token: 'secret', streamId: '' });
  t.match(codec.decode(text({ event: 'websocket:connected', headers: { call_id: '7', token: 'nested' } }), false), { type: 'start', callId: 7, token: 'nested' }, 'headers nested under `headers` are read too');

  const wire = new Int16Array(FRAME_SAMPLES).map((_, i) => i * 37 - 5000);
  const buffer = wire.buffer.slice(0);
  const event = codec.decode(buffer, true);
  t.equal(event?.type, 'audio');
  const samples = (event as { samples: Int16Array }).samples;
  t.equal(samples.length, 320, '640 bytes are 20 ms at 16 kHz');
  t.same([...samples], [...wire], 'little-endian PCM16 as sent');
  new Int16Array(buffer).fill(0);
  t.equal(samples[1], wire[1], 'copied out of the socket buffer, which uWS reuses');
  t.equal((codec.decode(new ArrayBuffer(641), true) as { samples: Int16Array }).samples.length, 320, 'an odd last byte is dropped');

  const out = codec.audio(wire);
  t.ok(out.binary, 'audio goes out binary');
  t.ok(Buffer.from(out.data as Uint8Array).equals(Buffer.from(wire.buffer)), 'the 640 bytes of the frame, little-endian');

  t.same(JSON.parse(String(codec.mark('seg-3')!.data)), { action: 'notify', payload: { name: 'seg-3' } });
  t.same(codec.decode(text({ event: 'websocket:notify', payload: { name: 'seg-3' } }), false), { type: 'mark', name: 'seg-3' });
  t.same(JSON.parse(String(codec.clear()!.data)), { action: 'clear' });
  t.equal(codec.decode(text({ event: 'websocket:cleared' }), false), undefined, 'the clear acknowledgement means nothing to the call');
  t.same(codec.decode(text({ event: 'websocket:dtmf', digit: '5', duration: 260 }), false), { type: 'dtmf', digit: '5' });
  t.same(codec.decode(text({ event: 'websocket:dtmf', dtmf: { digit: '#' } }), false), { type: 'dtmf', digit: '#' });

  for (const junk of ['not json', 'null', '[]', '"text"', '{"event":"websocket:notify","payload":null}', '{"event":"websocket:dtmf","digit":5}']) {
    t.equal(codec.decode(bytes(junk), false), undefined, junk);
  }
  t.ok(vonageFormat.hangUpOnClose?.(1000), "Vonage's normal close is the call's end");
  t.notOk(vonageFormat.hangUpOnClose?.(1006), 'a dropped connection is not');
});

t.test('NCCOs', async (t) => {
  const stream = nccoAnswer({ kind: 'stream', streamUrl: 'wss://example.com/ws/telephony/vonage', callId: 12, token: 'tok' });
  t.equal(stream.contentType, 'application/json');
  t.same(JSON.parse(stream.body), [
    { action: 'connect', endpoint: [{ type: 'websocket', uri: 'wss://example.com/ws/telephony/vonage', 'content-type': 'audio/l16;rate=16000', headers: { call_id: '12', token: 'tok' } }] },
  ]);
  t.ok(Buffer.byteLength(JSON.stringify({ call_id: '2147483647', token: 'x'.repeat(64) })) <= 512, 'the headers fit in the 512 bytes Vonage forwards');
  t.same(JSON.parse(nccoAnswer({ kind: 'refuse', text: 'Sorry.' }).body), [{ action: 'talk', text: 'Sorry.' }]);
  t.same(JSON.parse(nccoAnswer({ kind: 'hangup' }).body), []);
  t.same(transferNcco('+14155550123'), [{ action: 'connect', randomFromNumber: true, endpoint: [{ type: 'phone', number: '14155550123' }] }]);
  t.equal(bareNumber('+4915112345678'), '4915112345678');
  t.equal(plusNumber('4915112345678'), '+4915112345678');
  t.equal(plusNumber('Unknown'), 'Unknown', 'a withheld number stays as Vonage wrote it');
});

t.test('signed webhooks', async (t) => {
  const secret = 'vonage-signature-secret-0123456789';
  const now = Date.UTC(2026, 10, 25, 12, 0, 0);
  const iat = now / 1000;
  const body = JSON.stringify({ to: '14155550100', from: '14155550199', uuid: 'u-1' });
  const hash = createHash('sha256').update(body).digest('hex');
  const bearer = (claims: Record<string, unknown>, key = secret) => `Bearer ${hs256(claims, key)}`;
  const good = { iat, jti: 'j1', iss: 'Vonage', payload_hash: hash, api_key: 'abcd1234', application_id: 'app-1' };
  t.ok(vonageSigned(secret, bearer(good), body, now, 'app-1'), 'signed with the secret, for this body, now');
  t.ok(vonageSigned(secret, bearer(good), Buffer.from(body), now + 4 * 60_000), 'within 5 minutes');
  t.ok(vonageSigned(secret, bearer({ ...good, payload_hash: hash.toUpperCase() }), body, now), 'hex in either case');
  const refused: Array<[string, string, string]> = [
    ['no header', '', body],
    ['not a bearer token', `Basic ${Buffer.from('a:b').toString('base64')}`, body],
    ['another secret', bearer(good, 'another-secret'), body],
    ['another body', bearer(good), body.replace('u-1', 'u-2')],
    ['no payload hash', bearer({ ...good, payload_hash: undefined }), body],
    ['issued 6 minutes ago', bearer({ ...good, iat: iat - 360 }), body],
    ['issued 6 minutes ahead', bearer({ ...good, iat: iat + 360 }), body],
    ['no iat', bearer({ ...good, iat: undefined }), body],
    ['expired', bearer({ ...good, exp: iat - 1 }), body],
    ['another application', bearer({ ...good, application_id: 'app-2' }), body],
    ['a signature cut short', bearer(good).slice(0, -4), body],
  ];
  for (const [what, authorization, payload] of refused) t.notOk(vonageSigned(secret, authorization, payload, now, 'app-1'), what);
  // `alg: none` with the same claims and an empty signature.
  const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify(good)).toString('base64url')}.`;
  t.notOk(vonageSigned(secret, `Bearer ${unsigned}`, body, now), 'alg none');

  const query = { to: '14155550100', from: '14155550199', uuid: 'u-1', conversation_uuid: 'CON-1' };
  const queryHash = createHash('sha256').update(JSON.stringify(query)).digest('hex');
  t.ok(vonageSigned(secret, bearer({ ...good, payload_hash: queryHash }), JSON.stringify(query), now), "a GET's payload: its query fields as compact JSON, in order");
});

t.test('the webhook routes', async (t) => {
  const inbound: unknown[] = [];
  const statuses: unknown[][] = [];
  const voice = {
    inbound: async (carrier: string, call: unknown) => (inbound.push([carrier, call]), { kind: 'stream', streamUrl: 'wss://p.example/ws/telephony/vonage', callId: 5, token: 'tok' }),
    carrierStatus: (...args: unknown[]) => void statuses.push(args),
  } as unknown as VoiceService;
  const request = (method: string, path: string, fields: Record<string, string>, headers: Record<string, string> = {}): ApiRequest => {
    const [pathname, rawQuery = ''] = path.split('?');
    const body = method === 'GET' ? {} : fields;
    return { id: 'r1', method, path: pathname!, params: {}, query: {}, rawQuery: method === 'GET' ? new URLSearchParams(fields).toString() : rawQuery, headers, ip: '127.0.0.1', rawBody: Buffer.from(method === 'GET' ? '' : JSON.stringify(body)), body, files: {}, principal: undefined, log: undefined as never };
  };
  const route = (routes: RouteDefinition[], method: string, path: string) => routes.find((r) => r.method === method && r.path === path)!;
  const refusing = vonageRoutes(voice, { signatureSecret: undefined, acceptUnsigned: false });
  await t.rejects(async () => route(refusing, 'POST', '/api/telephony/vonage/inbound').handler(request('POST', '/api/telephony/vonage/inbound', { to: '14155550100', from: '14155550199', uuid: 'u-0' })), { code: 'forbidden', message: 'Vonage webhooks are not accepted by this server.' }, 'no secret and no choice to accept unsigned: refused');
  const open = vonageRoutes(voice, { signatureSecret: undefined, acceptUnsigned: true });
  const call = { to: '14155550100', from: '14155550199', uuid: 'u-1', conversation_uuid: 'CON-1' };
  for (const method of ['GET', 'POST']) {
    const answered = await route(open, method, '/api/telephony/vonage/inbound').handler(request(method, '/api/telephony/vonage/inbound', call));
    t.match(answered, { status: 200, headers: { 'Content-Type': 'application/json' } }, method);
    t.match(JSON.parse(String(answered.body)), [{ action: 'connect', endpoint: [{ headers: { call_id: '5', token: 'tok' } }] }]);
  }
  t.same(inbound, [
    ['vonage', { to: '+14155550100', from: '+14155550199', carrierCallId: 'u-1', requestId: 'r1' }],
    ['vonage', { to: '+14155550100', from: '+14155550199', carrierCallId: 'u-1', requestId: 'r1' }],
  ], 'the same call from a GET and a POST');

  const status = route(open, 'POST', '/api/telephony/vonage/status');
  const words: Array<[string, string | undefined, string | undefined]> = [
    ['started', undefined, undefined], ['ringing', 'ringing', undefined], ['answered', 'answered', undefined], ['completed', 'completed', undefined],
    ['busy', 'busy', undefined], ['timeout', 'no-answer', undefined], ['unanswered', 'no-answer', undefined], ['cancelled', 'canceled', undefined],
    ['failed', 'failed', undefined], ['rejected', 'failed', undefined], ['human', undefined, 'human'], ['machine', undefined, 'machine'], ['constructor', undefined, undefined],
  ];
  for (const [word] of words) t.same(await status.handler(request('POST', '/api/telephony/vonage/status?call_id=9', { uuid: 'u-1', status: word })), { status: 200 }, word);
  t.same(statuses, words.map(([, mapped, verdict]) => ['vonage', 9, 'u-1', mapped, verdict]));
  await status.handler(request('POST', '/api/telephony/vonage/status', { uuid: 'u-2', status: 'completed' }));
  t.equal(statuses.length, words.length, 'an event naming no call changes nothing');

  const signed = vonageRoutes(voice, { signatureSecret: 'secret', acceptUnsigned: true, applicationId: 'app-1' });
  await t.rejects(async () => route(signed, 'GET', '/api/telephony/vonage/inbound').handler(request('GET', '/api/telephony/vonage/inbound', call)), { name: 'PlatformError', code: 'forbidden', message: 'The Vonage signature does not match.' });
  const claims = (payload: string) => ({ iat: Math.floor(Date.now() / 1000), jti: 'j', payload_hash: createHash('sha256').update(payload).digest('hex'), application_id: 'app-1' });
  const get = await route(signed, 'GET', '/api/telephony/vonage/inbound').handler(request('GET', '/api/telephony/vonage/inbound', call, { authorization: `Bearer ${hs256(claims(JSON.stringify(call)), 'secret')}` }));
  t.equal(get.status, 200, 'a signed GET: the hash of its query fields');
  const event = { uuid: 'u-1', status: 'ringing' };
  const signedStatus = route(signed, 'POST', '/api/telephony/vonage/status');
  await signedStatus.handler(request('POST', '/api/telephony/vonage/status?call_id=9', event, { authorization: `Bearer ${hs256(claims(JSON.stringify(event)), 'secret')}` }));
  t.same(statuses.at(-1), ['vonage', 9, 'u-1', 'ringing', undefined], 'a signed event: the hash of its body');
  await t.rejects(async () => signedStatus.handler(request('POST', '/api/telephony/vonage/status?call_id=9', event)), { code: 'forbidden' }, 'an unsigned event with the secret set');
  t.equal(statuses.length, words.length + 1, 'changes nothing');
});

t.test('the Voice API adapter', async (t) => {
  const fake = await startFakeVonage(t);
  const carrier = createVonageCarrier({ applicationId: fake.applicationId, privateKey: fake.privateKey, apiUrl: `${fake.apiUrl}/` });
  t.equal(carrier.format, vonageFormat);
  const placed = await carrier.place({ callId: 9, carrier: 'vonage', to: '+4915112345678', from: '+14155550100', streamUrl: 'wss://p.example/ws/telephony/vonage', token: 'tok', statusUrl: 'https://p.example/api/telephony/vonage/status?call_id=9' });
  const create = fake.requests[0]!;
  t.match(create, { method: 'POST', path: '/v1/calls', authorized: true, uuid: placed.carrierCallId });
  t.same(create.json, {
    to: [{ type: 'phone', number: '4915112345678' }],
    from: { type: 'phone', number: '14155550100' },
    ncco: [{ action: 'connect', endpoint: [{ type: 'websocket', uri: 'wss://p.example/ws/telephony/vonage', 'content-type': 'audio/l16;rate=16000', headers: { call_id: '9', token: 'tok' } }] }],
    event_url: ['https://p.example/api/telephony/vonage/status?call_id=9'],
    event_method: 'POST',
    advanced_machine_detection: { behavior: 'continue', mode: 'default' },
  });
  await carrier.transfer(placed.carrierCallId, '+14155550123');
  await carrier.hangUp(placed.carrierCallId, 'ringing');
  t.match(fake.requests.slice(1), [
    { method: 'PUT', path: `/v1/calls/${placed.carrierCallId}`, authorized: true, json: { action: 'transfer', destination: { type: 'ncco', ncco: transferNcco('+14155550123') } } },
    { method: 'PUT', path: `/v1/calls/${placed.carrierCallId}`, authorized: true, json: { action: 'hangup' } },
  ]);
  fake.failNext(400);
  await t.rejects(carrier.place({ callId: 10, carrier: 'vonage', to: '+1', from: '+14155550100', streamUrl: 'wss://x', token: 't', statusUrl: 'https://x' }), { name: 'CarrierError', message: 'The carrier refused the request (HTTP 400: The request failed due to validation errors)' });
  const stranger = createVonageCarrier({ applicationId: fake.applicationId, privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey, apiUrl: fake.apiUrl });
  await t.rejects(stranger.hangUp(placed.carrierCallId, 'connected'), { name: 'CarrierError', message: /HTTP 401/ }, 'a JWT signed with another key is refused (the fake checks the signature)');
});

t.test('settings', async (t) => {
  t.equal(loadConfig({}).vonage, undefined, 'without credentials: the loopback carrier stands in');
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const dir = mkdtempSync(join(tmpdir(), 'vonage-key-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'private.key'), pem);
  const forms: Array<[string, string]> = [['PEM text', pem], ['PEM with escaped line breaks', pem.replace(/\n/g, '\\n')], ['a file path', join(dir, 'private.key')]];
  for (const [what, value] of forms) {
    const config = loadConfig({ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: value, VONAGE_SIGNATURE_SECRET: 'sig' });
    t.equal(config.vonage?.applicationId, 'app-1', what);
    t.equal(config.vonage?.privateKey.asymmetricKeyType, 'rsa', what);
    t.equal(config.vonage?.apiUrl, 'https://api.nexmo.com', `${what}: the default API origin`);
  }
  const custom = loadConfig({ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: pem, VONAGE_API_URL: 'http://127.0.0.1:9999/', VONAGE_SIGNATURE_SECRET: 'sig' });
  t.equal(custom.vonage?.apiUrl, 'http://127.0.0.1:9999');
  t.equal(custom.vonageSignatureSecret, 'sig');
  t.throws(() => loadConfig({ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: pem }), /^Invalid VONAGE_SIGNATURE_SECRET: must be set with VONAGE_APPLICATION_ID: Vonage's webhooks are checked with it/, 'a carrier whose webhooks could not be checked');
  t.equal(loadConfig({ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: pem, ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: 'true' }).vonage?.applicationId, 'app-1', 'unless the operator takes them unsigned');

  const pasted = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7';
  const bad: Array<[Record<string, string>, RegExp]> = [
    [{ VONAGE_APPLICATION_ID: 'app-1' }, /^Invalid VONAGE_PRIVATE_KEY: must be set with VONAGE_APPLICATION_ID$/],
    [{ VONAGE_PRIVATE_KEY: pem }, /^Invalid VONAGE_APPLICATION_ID: must be set with VONAGE_PRIVATE_KEY$/],
    [{ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: pasted }, /^Invalid VONAGE_PRIVATE_KEY: expected PEM text or the path of a readable PEM file \(ENOENT\)$/],
    [{ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: '-----BEGIN PRIVATE KEY-----\nnonsense\n-----END PRIVATE KEY-----' }, /^Invalid VONAGE_PRIVATE_KEY: is not a PEM private key$/],
    [{ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }, /expected an RSA key, got ec/],
    [{ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: pem, VONAGE_API_URL: 'ftp://x' }, /^Invalid VONAGE_API_URL/],
  ];
  for (const [env, message] of bad) {
    t.throws(() => loadConfig(env), ConfigError);
    t.throws(() => loadConfig(env), { message }, Object.keys(env).join(' '));
  }
  try {
    loadConfig({ VONAGE_APPLICATION_ID: 'app-1', VONAGE_PRIVATE_KEY: pasted });
  } catch (error) {
    t.notOk((error as Error).message.includes(pasted.slice(0, 12)), 'the value is not echoed');
  }
});
