import t, { type Test } from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { SimulatedPhone } from './helpers/phone.js';
import { startTestPlatform, type TestPlatform } from './helpers/platform.js';

/**
 * Voice calls end to end over real sockets with the dev speech providers and the dev model, on a
 * manual clock: inbound Twilio flow, the greeting, a caller turn answered, the transcript of what
 * was heard, hang-up.
 */

interface Setup {
  api: TestPlatform;
  clock: ManualClock;
  scripts: Map<number, string[]>;
  token: string;
  userId: number;
  number: string;
}

async function setup(t: Test, assistant: Record<string, unknown> = {}): Promise<Setup & { assistantId: number }> {
  const clock = new ManualClock();
  const scripts = new Map<number, string[]>();
  const api = await startTestPlatform(t, {}, { clock, speech: { transcripts: (callId, n) => scripts.get(callId)?.[n - 1] } });
  const user = await api.user();
  await api.credit(user.id, 100);
  const number = await api.phoneNumber(user.token);
  const created = await api.assistant(user.token, { type: 'inbound', phone_number_id: number.id, initial_message: 'Hello, this is Bot.', ...assistant });
  return { api, clock, scripts, token: user.token, userId: user.id, number: number.number, assistantId: created.id };
}

async function callIn(s: Setup, from = '+14155550199'): Promise<{ callId: number; phone: SimulatedPhone; twiml: string }> {
  const form = new URLSearchParams({ To: s.number, From: from, CallSid: `CA${Math.random().toString(16).slice(2).padEnd(32, '0')}` });
  const answer = await s.api.request('POST', '/telephony/twilio/inbound', { raw: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const twiml = String(answer.body);
  const url = /<Stream url="([^"]+)"/.exec(twiml)?.[1];
  const callId = /name="call_id" value="(\d+)"/.exec(twiml)?.[1];
  const token = /name="token" value="([^"]+)"/.exec(twiml)?.[1];
  if (!url || !callId || !token) throw new Error(`unexpected TwiML: ${twiml}`);
  const phone = await SimulatedPhone.dial(url.replace(/&amp;/g, '&'), form.get('CallSid')!, { call_id: callId, token }, s.clock);
  return { callId: Number(callId), phone, twiml };
}

t.test('an inbound call: TwiML, greeting, a turn answered, hang-up, the call record', async (t) => {
  const s = await setup(t);
  const form = new URLSearchParams({ To: s.number, From: '+14155550199', CallSid: 'CA0001' });
  const answer = await s.api.request('POST', '/telephony/twilio/inbound', { raw: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.equal(answer.status, 200);
  t.match(answer.headers.get('content-type'), /text\/xml/);
  t.match(String(answer.body), /<Connect><Stream url="ws:\/\/127\.0\.0\.1:\d+\/ws\/telephony\/twilio"><Parameter name="call_id" value="\d+"\/><Parameter name="token" value="[^"]+"\/><\/Stream><\/Connect>/);
  const callId = Number(/name="call_id" value="(\d+)"/.exec(String(answer.body))![1]);
  const ringing = await s.api.request('GET', `/user/calls/${callId}`, { token: s.token });
  t.equal(ringing.body.data.status, 'ringing');
  t.equal(ringing.body.data.type, 'inbound');
  t.equal(ringing.body.data.client_phone_number, '+14155550199');
  t.equal(ringing.body.data.assistant_phone_number, s.number);

  const { phone, callId: id } = await callIn(s);
  s.scripts.set(id, ['What are your opening hours?']);
  await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
  await phone.untilAgentDone();
  t.ok(phone.heard.marks.length > 0, 'marks went out and came back');
  const greetingFrames = phone.heard.speechFrames;
  await phone.talk(1_000);
  await phone.until(() => phone.heard.speechFrames > greetingFrames + 10, 5_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  await s.api.platform.runtime.services.voice.whenEnded(id);
  const ended = await s.api.request('GET', `/user/calls/${id}`, { token: s.token });
  t.equal(ended.body.data.status, 'ended_by_customer');
  t.equal(ended.body.data.answered_by, 'human');
  t.match(ended.body.data.transcript, /^assistant: Hello, this is Bot\.\nuser: What are your opening hours\?\nassistant: Thanks for your message\. You wrote: "What are your opening hours\?"$/);
  t.ok(ended.body.data.duration >= 2, `duration ${ended.body.data.duration}`);
});
