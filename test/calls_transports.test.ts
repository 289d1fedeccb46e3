import { createHmac } from 'node:crypto';
import t, { type Test } from 'tap';
import { twilioSignature } from '../api/routes/carriers/twilio.js';
import { twilioFormat } from '../runtime/voice/serializers/twilio.js';
import { createLoopbackCarrier, type LoopbackDial } from '../runtime/calls/carriers/loopback.js';
import { startFakeTwilio } from './fakes/twilio.js';
import { Conditions } from './helpers/conditions.js';
import { SimulatedPhone } from './helpers/phone.js';
import { endedCall, voiceSetup, type VoiceSetup } from './helpers/voice.js';

/**
 * Web calls, outbound calls through the loopback carrier and through Twilio's REST API (a local
 * fake), status callbacks moving the status, signatures, voicemail, and a failing provider.
 */

const form = (fields: Record<string, string>) => ({ raw: new URLSearchParams(fields).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });

t.test('a web call: create, PCM16 both ways, marks, hang-up; refusals', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound', phone_number_id: null });
  const created = await s.api.request('POST', '/web-calls', { body: { assistant_id: s.assistantUuid } });
  t.equal(created.status, 201);
  t.match(created.body, { call_id: Number, token: String });
  t.equal(created.body.websocket_url, `ws://127.0.0.1:${new URL(s.api.origin).port}/ws/web-call?call_id=${created.body.call_id}&token=${encodeURIComponent(created.body.token)}`);
  const callId = created.body.call_id as number;
  s.scripts.set(callId, ['Hello from the browser.']);
  t.equal((await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data.status, 'initiated');

  const phone = await SimulatedPhone.webCall(created.body.websocket_url, s.clock);
  await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
  await phone.untilAgentDone();
  t.ok(phone.heard.marks.length > 0, 'marks');
  // Unsigned without TWILIO_AUTH_TOKEN: a carrier callback naming a web call (ids are sequential) must not end it.
  await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: 'CA1', CallStatus: 'completed' }));
  t.equal(s.api.platform.runtime.services.voice.session(callId)!.currentStatus, 'in-progress', 'a web call has no carrier to report on it');
  await phone.talk(800);
  await phone.until(() => phone.heard.speechFrames > 120, 5_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.type, 'web');
  t.equal(call.status, 'ended_by_customer');
  t.equal(call.client_phone_number, null);
  t.equal(call.transcript, 'assistant: Hello, this is Bot.\nuser: Hello from the browser.\nassistant: Thanks for your message. You wrote: "Hello from the browser."');

  await t.rejects(SimulatedPhone.webCall(created.body.websocket_url, s.clock), /401/, 'a used token is refused');
  await t.rejects(SimulatedPhone.webCall(`ws://127.0.0.1:${new URL(s.api.origin).port}/ws/web-call`, s.clock), /401/, 'no token');
  const unknown = await s.api.request('POST', '/web-calls', { body: { assistant_id: '00000000-0000-4000-8000-000000000000' } });
  t.equal(unknown.status, 404);
  t.same(unknown.body, { message: 'Assistant not found' });
  const bad = await s.api.request('POST', '/web-calls', { body: { assistant_id: 'nope' } });
  t.equal(bad.status, 422);
  t.match(bad.body.errors, { assistant_id: [String] });

  const broke = await s.api.user();
  const theirs = await s.api.assistant(broke.token, { type: 'outbound' });
  const refused = await s.api.request('POST', '/web-calls', { body: { assistant_id: theirs.uuid } });
  t.equal(refused.status, 402);
  t.same(refused.body, { message: 'Insufficient balance. Please top up your account.' });
});

async function outboundSetup(t: Test, dial: (call: LoopbackDial) => void, assistant: Record<string, unknown> = {}): Promise<VoiceSetup> {
  return voiceSetup(t, { type: 'outbound', ...assistant }, { runtime: { carrier: createLoopbackCarrier(dial) } });
}

t.test('an outbound call through the loopback carrier: initiated, ringing, in-progress, ended', async (t) => {
  const dialed: LoopbackDial[] = [];
  const s = await outboundSetup(t, (call) => dialed.push(call));
  const placed = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678', variables: { name: 'Ada' } } });
  t.equal(placed.status, 201);
  t.same(placed.body, { message: 'Call initiated successfully', data: { id: placed.body.data.id, status: 'initiated' } });
  const callId = placed.body.data.id as number;
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(dialed.length, 1);
  t.equal(dialed[0]!.to, '+4915112345678');
  t.equal(dialed[0]!.from, s.number);
  const read = async () => (await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data;
  t.equal((await read()).status, 'initiated');
  await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: dialed[0]!.carrierCallId, CallStatus: 'ringing' }));
  t.equal(s.api.platform.runtime.services.voice.session(callId)!.currentStatus, 'ringing');
  s.scripts.set(callId, ['Hi, who is this?']);
  const phone = await SimulatedPhone.dial(dialed[0]!.streamUrl, dialed[0]!.carrierCallId, { call_id: String(callId), token: dialed[0]!.token }, s.clock);
  await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
  await s.api.platform.runtime.services.voice.saved(callId);
  t.equal((await read()).status, 'in-progress');
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => phone.heard.speechFrames > 120, 5_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_customer');
  t.equal(call.type, 'outbound');
  t.equal(call.client_phone_number, '+4915112345678');
  t.equal(call.assistant_phone_number, s.number);
  t.same(call.variables, { name: 'Ada' });
  t.equal(call.answered_by, 'human', 'a short first utterance is a person');

  const invalid = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '0151 123' } });
  t.equal(invalid.status, 422);
  t.same(invalid.body.errors, { phone_number: ['The phone number must be in E.164 format (for example +14155550100).'] });
  const inbound = await s.api.assistant(s.token, { type: 'inbound' });
  const wrongType = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: inbound.id, phone_number: '+4915112345678' } });
  t.equal(wrongType.status, 422);
  t.same(wrongType.body.errors, { assistant_id: ['The assistant must be an outbound assistant.'] });
  const noNumber = await s.api.assistant(s.token, { type: 'outbound' });
  const unnumbered = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: noNumber.id, phone_number: '+4915112345678' } });
  t.same(unnumbered.body.errors, { assistant_id: ['The assistant has no phone number to call from.'] });
  const other = await s.api.user();
  const foreign = await s.api.request('POST', '/user/calls', { token: other.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } });
  t.equal(foreign.status, 422);
  t.same(foreign.body.errors, { assistant_id: ['The selected assistant id is invalid.'] });
});

t.test('outbound status callbacks: busy, no-answer after ringing_time (the carrier told to stop ringing), failed', async (t) => {
  const dialed: LoopbackDial[] = [];
  const carrier = createLoopbackCarrier((call) => dialed.push(call));
  const s = await voiceSetup(t, { type: 'outbound', ringing_time: 10 }, { runtime: { carrier } });
  const place = async () => (await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } })).body.data.id as number;
  const sidOf = (callId: number) => dialed.find((call) => call.callId === callId)!.carrierCallId;
  const busy = await place();
  await s.api.request('POST', `/telephony/twilio/status?call_id=${busy}`, form({ CallSid: sidOf(busy), CallStatus: 'busy' }));
  t.equal((await endedCall(s, busy)).status, 'busy');
  const unanswered = await place();
  await s.api.request('POST', `/telephony/twilio/status?call_id=${unanswered}`, form({ CallSid: sidOf(unanswered), CallStatus: 'ringing' }));
  s.clock.advance(10_100);
  t.equal((await endedCall(s, unanswered)).status, 'no-answer');
  t.same(carrier.hangUps, [{ carrierCallId: dialed[1]!.carrierCallId, state: 'ringing' }], 'the callee\'s phone stops ringing; a busy call needs no hang-up');
  const failed = await place();
  await s.api.request('POST', `/telephony/twilio/status?call_id=${failed}`, form({ CallSid: sidOf(failed), CallStatus: 'failed' }));
  t.equal((await endedCall(s, failed)).status, 'failed');
  const canceled = await place();
  await s.api.request('POST', `/telephony/twilio/status?call_id=${canceled}`, form({ CallSid: sidOf(canceled), CallStatus: 'ringing' }));
  await s.api.request('POST', `/telephony/twilio/status?call_id=${canceled}`, form({ CallSid: sidOf(canceled), CallStatus: 'canceled' }));
  t.equal((await endedCall(s, canceled)).status, 'no-answer');
  t.equal(carrier.hangUps.length, 1, 'calls the carrier ended itself are not hung up there again');
});

t.test('an outbound call that ends while the carrier is still placing it is hung up once the carrier names it', async (t) => {
  const hangUps: Array<{ carrierCallId: string; state: string }> = [];
  const hungUp = new Conditions();
  let answer!: (placed: { carrierCallId: string }) => void;
  const placing = new Promise<{ carrierCallId: string }>((resolve) => (answer = resolve));
  let asked = 0;
  const carrier = {
    name: 'held',
    format: twilioFormat,
    place: () => (asked++, placing),
    transfer: async () => {},
    hangUp: async (carrierCallId: string, state: 'ringing' | 'connected') => {
      hangUps.push({ carrierCallId, state });
      hungUp.changed();
    },
  };
  const s = await voiceSetup(t, { type: 'outbound' }, { runtime: { carrier } });
  const callId = (await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } })).body.data.id as number;
  t.equal(asked, 1);
  // Never connected: the call fails after five minutes, with the carrier's request still open.
  s.clock.advance(5 * 60_000 + 100);
  t.equal((await endedCall(s, callId)).status, 'failed');
  t.same(hangUps, []);
  answer({ carrierCallId: 'CA-late' });
  await hungUp.until(() => hangUps.length > 0);
  t.same(hangUps, [{ carrierCallId: 'CA-late', state: 'ringing' }]);
});

t.test('Twilio REST carrier: create call with TwiML and callbacks; signed webhooks; voicemail hang-up', async (t) => {
  const sid = 'AC0123456789abcdef0123456789abcdef';
  const authToken = 'twilio-auth-token';
  const fake = await startFakeTwilio(t, sid, authToken);
  const s = await voiceSetup(t, { type: 'outbound' }, { config: { twilio: { accountSid: sid, authToken, apiUrl: fake.apiUrl }, twilioAuthToken: authToken } });
  const placed = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } });
  const callId = placed.body.data.id as number;
  await fake.received(1);
  const created = fake.requests[0]!;
  t.equal(created.path, `/2010-04-01/Accounts/${sid}/Calls.json`);
  t.equal(created.form.get('To'), '+4915112345678');
  t.equal(created.form.get('From'), s.number);
  const origin = s.api.origin;
  t.equal(created.form.get('StatusCallback'), `${origin}/api/telephony/twilio/status?call_id=${callId}`);
  t.same(created.form.getAll('StatusCallbackEvent'), ['initiated', 'ringing', 'answered', 'completed']);
  const twiml = created.form.get('Twiml')!;
  t.match(twiml, new RegExp(`<Stream url="ws://127\\.0\\.0\\.1:\\d+/ws/telephony/twilio"><Parameter name="call_id" value="${callId}"/>`));

  const statusPath = `/api/telephony/twilio/status?call_id=${callId}`;
  const signed = (fields: Record<string, string>) => {
    const params = new URLSearchParams(fields);
    return { ...form(fields), headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(authToken, `${origin}${statusPath}`, params) } };
  };
  const unsigned = await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallStatus: 'ringing' }));
  t.equal(unsigned.status, 403, 'an unsigned callback is refused');
  const inboundUnsigned = await s.api.request('POST', '/telephony/twilio/inbound', form({ To: s.number, From: '+1', CallSid: 'CA1' }));
  t.equal(inboundUnsigned.status, 403);
  const crowded = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`x${i}`, '']));
  for (const path of [`/telephony/twilio/status?call_id=${callId}`, '/telephony/twilio/inbound']) {
    const refused = await s.api.request('POST', path, signed({ CallSid: 'CA1', ...crowded }));
    t.same([refused.status, refused.body], [413, { message: 'A carrier webhook has at most 200 form fields.' }], `${path}: thousands of fields are not parsed or hashed`);
  }
  const carrierSid = `CA${'1'.padStart(32, '0')}`;
  const ringing = await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, signed({ CallSid: carrierSid, CallStatus: 'ringing', ...Object.fromEntries(Array.from({ length: 198 }, (_, i) => [`x${i}`, ''])) }));
  t.equal(ringing.status, 200, '200 fields are taken');
  t.equal(s.api.platform.runtime.services.voice.session(callId)!.currentStatus, 'ringing');

  const token = /name="token" value="([^"]+)"/.exec(twiml)![1]!;
  const phone = await SimulatedPhone.dial(/<Stream url="([^"]+)"/.exec(twiml)![1]!, carrierSid, { call_id: String(callId), token }, s.clock);
  await phone.until(() => phone.heard.speechFrames > 5, 2_000, 'the greeting');
  await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, signed({ CallSid: 'CA2', CallStatus: 'completed' }));
  t.equal(s.api.platform.runtime.services.voice.session(callId)!.currentStatus, 'in-progress', "another call's callback (a guessed call id) changes nothing");
  await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, signed({ CallSid: carrierSid, CallStatus: 'in-progress', AnsweredBy: 'machine_start' }));
  await phone.until(() => phone.closed, 2_000, 'the hang-up on voicemail');
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_assistant');
  t.equal(call.answered_by, 'machine');
});

t.test("Twilio's signature: the URL, then each field's name and value by name, repeats in the order sent", async (t) => {
  const params = new URLSearchParams('To=%2B1555&Digits=2&From=%2B1444&Digits=1');
  const expected = createHmac('sha1', 'token').update('https://example.com/hook?x=1' + 'Digits2' + 'Digits1' + 'From+1444' + 'To+1555').digest('base64');
  t.equal(twilioSignature('token', 'https://example.com/hook?x=1', params), expected);
});

t.test('Twilio REST carrier: a call given up while ringing is canceled there', async (t) => {
  const sid = 'AC0123456789abcdef0123456789abcdef';
  const authToken = 'twilio-auth-token';
  const fake = await startFakeTwilio(t, sid, authToken);
  const s = await voiceSetup(t, { type: 'outbound', ringing_time: 5 }, { config: { twilio: { accountSid: sid, authToken, apiUrl: fake.apiUrl } } });
  const callId = (await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } })).body.data.id as number;
  await fake.received(1);
  await s.api.platform.runtime.services.voice.saved(callId);
  await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: `CA${'1'.padStart(32, '0')}`, CallStatus: 'ringing' }));
  s.clock.advance(5_100);
  t.equal((await endedCall(s, callId)).status, 'no-answer');
  await fake.received(2);
  t.equal(fake.requests[1]!.path, `/2010-04-01/Accounts/${sid}/Calls/CA${'1'.padStart(32, '0')}.json`);
  t.equal(fake.requests[1]!.form.get('Status'), 'canceled');
});

t.test('voicemail: a long greeting is a machine; the message is left after it (end_call_on_voicemail at its default); a failing voice fails the call', async (t) => {
  const dialed: LoopbackDial[] = [];
  const s = await outboundSetup(t, (call) => dialed.push(call), { voice_mail_message: 'Please call us back at {{callback}}.', wait_for_customer: true });
  const callId = (await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678', variables: { callback: '555 0100' } } })).body.data.id as number;
  await new Promise((resolve) => setImmediate(resolve));
  const phone = await SimulatedPhone.dial(dialed[0]!.streamUrl, dialed[0]!.carrierCallId, { call_id: String(callId), token: dialed[0]!.token }, s.clock);
  s.scripts.set(callId, ['You have reached Ada. Please leave a message after the tone.']);
  await phone.talk(4_000);
  t.equal(phone.heard.speechFrames, 0, 'nothing is said over the greeting');
  await phone.until(() => phone.closed, 10_000, 'the message and hang-up');
  t.ok(phone.heard.speechFrames > 50, 'the message was spoken');
  const call = await endedCall(s, callId);
  t.equal(call.answered_by, 'machine');
  t.equal(call.status, 'ended_by_assistant');
  t.match(call.transcript, /assistant: Please call us back at 555 0100\.$/);

  const broken = await voiceSetup(t, {}, { runtime: { speech: { tts: { name: 'broken', async *synthesize() { throw new Error('voice service down'); } } } } });
  const { callIn } = await import('./helpers/voice.js');
  const failing = await callIn(broken);
  await failing.phone.until(() => failing.phone.closed, 2_000, 'the end of the call');
  t.equal((await endedCall(broken, failing.callId)).status, 'failed');
});

t.test('voicemail: a short breath between the phrases of a greeting does not end its first utterance', async (t) => {
  const dialed: LoopbackDial[] = [];
  const s = await outboundSetup(t, (call) => dialed.push(call), { voice_mail_message: 'Please call us back.', wait_for_customer: true });
  const callId = (await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } })).body.data.id as number;
  await new Promise((resolve) => setImmediate(resolve));
  const phone = await SimulatedPhone.dial(dialed[0]!.streamUrl, dialed[0]!.carrierCallId, { call_id: String(callId), token: dialed[0]!.token }, s.clock);
  s.scripts.set(callId, ['You have reached Ada.', 'Please leave a message after the tone.']);
  // The phrase ends on 40 ms of its own quiet, then 240 ms of silence, then the next phrase needs
  // 40 ms to count as speech: 320 ms without a loud frame, but 240 ms of pause once the VAD's
  // 80 ms hangover is over, under the 300 ms that end a first utterance.
  await phone.talk(2_000);
  await phone.silence(240);
  await phone.talk(2_000);
  await phone.until(() => phone.closed, 10_000, 'the message and hang-up');
  t.equal((await endedCall(s, callId)).answered_by, 'machine');
});

t.test('caller audio faster than real time: beyond a 2 s burst the excess is dropped and counted', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound', phone_number_id: null });
  const created = await s.api.request('POST', '/web-calls', { body: { assistant_id: s.assistantUuid } });
  const phone = await SimulatedPhone.webCall(created.body.websocket_url, s.clock);
  const dropped = async () => Number(/^call_audio_caller_frames_dropped_total (\d+)$/m.exec(String((await s.api.request('GET', '//metrics')).body))?.[1]);
  t.equal(await dropped(), 0);
  // Five seconds of audio at one instant of the call's clock: two seconds of it are taken.
  for (let i = 0; i < 250; i++) phone.phone.speak();
  await phone.phone.sync();
  t.equal(await dropped(), 150, 'the 150 frames beyond the burst');
  // Once the clock has caught up, audio at real time passes whole again.
  s.clock.advance(2_000);
  await phone.silence(1_000);
  t.equal(await dropped(), 150, 'nothing dropped at real time');
  phone.phone.hangUp();
  t.equal((await endedCall(s, created.body.call_id)).status, 'ended_by_customer');
});

t.test("voicemail: the carrier's machine detection arriving while the call still rings is acted on once it connects", async (t) => {
  const dialed: LoopbackDial[] = [];
  const s = await outboundSetup(t, (call) => dialed.push(call), { voice_mail_message: 'Please call us back.' });
  const callId = (await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } })).body.data.id as number;
  await new Promise((resolve) => setImmediate(resolve));
  await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: dialed[0]!.carrierCallId, CallStatus: 'ringing', AnsweredBy: 'machine_end_beep' }));
  const phone = await SimulatedPhone.dial(dialed[0]!.streamUrl, dialed[0]!.carrierCallId, { call_id: String(callId), token: dialed[0]!.token }, s.clock);
  await phone.until(() => phone.closed, 40_000, 'the message and hang-up');
  const call = await endedCall(s, callId);
  t.equal(call.answered_by, 'machine');
  t.match(call.transcript, /assistant: Please call us back\.$/);
});
