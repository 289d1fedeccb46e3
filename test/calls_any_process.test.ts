/**
 * A call is held by the process that accepts its media stream, whichever process its carrier's
 * webhook, its status callbacks and its owner's requests land on. Two platforms (A and B) share
 * one database and one manual clock:
 * 1. Inbound: the voice webhook lands on A, the stream on B. B holds the call (greeting, a turn)
 *    and A lets it go at once; a hang-up asked of A ends it on B; one end, charged once, and the
 *    call's events in order from A's `start` to B's `end`.
 * 2. A repeat of the voice webhook on B before the stream joins streams the same call with a new
 *    token; either answer's token joins it, once; still one call.
 * 3. Outbound: placed on A; the carrier's `ringing` callback lands on B and reaches A (which holds
 *    the call until its stream joins); the stream joins B; a forged `busy` naming another carrier
 *    call, sent to A, is not passed on; the carrier's `completed` callback lands on A and ends the
 *    call on B.
 */
import { once } from 'node:events';
import t, { type Test } from 'tap';
import { createLoopbackCarrier, type LoopbackDial } from '../runtime/calls/carriers/loopback.js';
import { SimulatedPhone } from './helpers/phone.js';
import { startTestPlatform, type TestPlatform } from './helpers/platform.js';
import { voiceSetup, type VoiceSetup } from './helpers/voice.js';

/**
 * The phone moves simulated time 20 ms a frame whatever the server is doing, while the process
 * joining the stream claims the call and loads its session in real time: on a loaded machine
 * that takes many frames. The greeting is only looked for within this much simulated time.
 */
const GREETING_WITHIN_MS = 10_000;

const form = (fields: Record<string, string>) => ({ raw: new URLSearchParams(fields).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });

/** B: a second process on A's database and clock, with the same scripted transcripts. */
async function secondProcess(t: Test, s: VoiceSetup): Promise<TestPlatform> {
  return startTestPlatform(t, { databaseUrl: s.api.databaseUrl, acceptUnsignedCarrierWebhooks: true }, { clock: s.clock, speech: { transcripts: (callId, n) => s.scripts.get(callId)?.[n - 1] } });
}

const voiceOf = (p: TestPlatform) => p.platform.runtime.services.voice;

/** The stream URL of an answer, on process `p` instead (as a load balancer might send it). */
const onProcess = (url: string, p: TestPlatform) => url.replace(/^wss?:\/\/[^/]+/, p.origin.replace(/^http/, 'ws'));

/** Waits (real time: another process's notification) until `check` holds. */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A Twilio voice webhook to `p` for a call to the setup's number: the call, its stream URL and token. */
async function webhook(s: VoiceSetup, p: TestPlatform, callSid: string): Promise<{ callId: number; url: string; token: string }> {
  const twiml = String((await p.request('POST', '/telephony/twilio/inbound', form({ To: s.number, From: '+14155550199', CallSid: callSid }))).body);
  const url = /<Stream url="([^"]+)"/.exec(twiml)?.[1];
  const callId = /name="call_id" value="(\d+)"/.exec(twiml)?.[1];
  const token = /name="token" value="([^"]+)"/.exec(twiml)?.[1];
  if (!url || !callId || !token) throw new Error(`unexpected TwiML: ${twiml}`);
  return { callId: Number(callId), url, token };
}

async function ended(s: VoiceSetup, p: TestPlatform, callId: number): Promise<Record<string, any>> {
  let call: Record<string, any> = {};
  await until(async () => {
    call = (await p.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data;
    return !['initiated', 'ringing', 'in-progress'].includes(call.status);
  }, `call ${callId} to end`);
  return call;
}

t.test('inbound: webhook on A, stream on B; B holds it, A lets go; a hang-up asked of A ends it on B, once', async (t) => {
  const s = await voiceSetup(t);
  const b = await secondProcess(t, s);
  const { callId, url, token } = await webhook(s, s.api, 'CA00000000000000000000000000000a01');
  t.ok(voiceOf(s.api).session(callId), 'A holds the ringing call it created');
  s.scripts.set(callId, ['Is the shop open today?']);
  const phone = await SimulatedPhone.dial(onProcess(url, b), 'CA00000000000000000000000000000a01', { call_id: String(callId), token }, s.clock);
  phone.busy = () => voiceOf(b).session(callId)?.agentState === 'thinking';
  await phone.until(() => phone.heard.speechFrames > 10, GREETING_WITHIN_MS, 'the greeting, from B');
  t.ok(voiceOf(b).session(callId), 'B holds the call');
  await until(() => voiceOf(s.api).session(callId) === undefined, 'A to let the call go');
  t.equal(voiceOf(s.api).liveCount(), 0, 'A holds no call');

  await phone.untilAgentDone();
  await phone.turn(1_000);
  await phone.untilAgentDone();
  const closed = once(phone.phone.socket, 'close');
  const hungUp = await s.api.request('POST', `/user/calls/${callId}/hangup`, { token: s.token });
  t.equal(hungUp.status, 200, 'A asked B, and B ended it');
  t.match(hungUp.body.data, { id: callId, status: 'ended' });
  await closed;
  const call = await ended(s, b, callId);
  t.match(call.transcript, /user: Is the shop open today\?/, 'the turn B heard');
  t.ok(call.total_cost > 0, 'charged');

  const events = (await s.api.request('GET', `/user/calls/${callId}/events?per_page=100`, { token: s.token })).body.data as Array<{ type: string; data: Record<string, unknown> }>;
  const kinds = events.map((event) => (event.type === 'status' ? `status:${event.data.status}` : event.type));
  t.equal(kinds[0], 'start', "A's start first");
  t.equal(kinds.at(-1), 'end', "B's end last");
  t.equal(kinds.filter((kind) => kind === 'start' || kind === 'end').length, 2, 'one start, one end');
  t.ok(kinds.includes('status:in-progress') && kinds.includes('turn'), kinds.join(', '));
  t.match(events.at(-1)!.data, { status: 'ended', reason: 'hangup' });

  const charges = (await s.api.request('GET', '/user/transactions?type=call', { token: s.token })).body.data as Array<{ call_id: number; amount: number }>;
  t.same(charges.filter((entry) => entry.call_id === callId).map((entry) => entry.amount), [-call.total_cost], 'charged once, by B');
});

t.test('a repeated voice webhook on B before the stream joins: the same call, a new token; either joins it once', async (t) => {
  const s = await voiceSetup(t);
  const b = await secondProcess(t, s);
  const sid = 'CA00000000000000000000000000000b02';
  const first = await webhook(s, s.api, sid);
  const again = await webhook(s, b, sid);
  t.equal(again.callId, first.callId, 'the same call');
  t.not(again.token, first.token, 'with a token of its own');
  const phone = await SimulatedPhone.dial(onProcess(first.url, b), sid, { call_id: String(first.callId), token: first.token }, s.clock);
  await phone.until(() => phone.heard.speechFrames > 10, GREETING_WITHIN_MS, 'the greeting');
  const { MediaStreamPhone } = await import('../runtime/calls/carriers/loopback.js');
  const intruder = new MediaStreamPhone(onProcess(first.url, s.api), { callSid: sid, customParameters: { call_id: String(first.callId), token: again.token } });
  const refused = new Promise<number>((resolve) => intruder.on('close', resolve));
  await intruder.open();
  t.equal(await refused, 1008, "the other answer's token no longer joins it");
  t.match(String((await s.api.request('POST', '/telephony/twilio/inbound', form({ To: s.number, From: '+14155550199', CallSid: sid }))).body), /<Hangup\/>/, 'a repeat after it joined is hung up');
  t.equal((await s.api.request('GET', '/user/calls', { token: s.token })).body.total, 1, 'one call');
  phone.phone.hangUp();
  t.equal((await ended(s, b, first.callId)).status, 'ended_by_customer');
});

t.test("outbound: placed on A, its callbacks on either process, its stream on B; the carrier's completed ends it on B", async (t) => {
  const dialed: LoopbackDial[] = [];
  const s = await voiceSetup(t, { type: 'outbound' }, { runtime: { carrier: createLoopbackCarrier((call) => dialed.push(call)) } });
  const b = await secondProcess(t, s);
  const placed = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } });
  t.equal(placed.status, 201);
  const callId = placed.body.data.id as number;
  await until(() => dialed.length === 1, 'the carrier to be asked');
  const { carrierCallId, streamUrl, token } = dialed[0]!;
  t.equal((await b.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: carrierCallId, CallStatus: 'ringing' }))).status, 200, 'ringing, told to B');
  await until(() => voiceOf(s.api).session(callId)?.currentStatus === 'ringing', "A's call to ring");

  const phone = await SimulatedPhone.dial(onProcess(streamUrl, b), carrierCallId, { call_id: String(callId), token }, s.clock);
  await phone.until(() => phone.heard.speechFrames > 10, GREETING_WITHIN_MS, 'the greeting, from B');
  await until(() => voiceOf(s.api).session(callId) === undefined, 'A to let the call go');
  t.equal(voiceOf(b).session(callId)?.currentStatus, 'in-progress', 'B holds it, answered');

  const forgedBusy = await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: 'CAforged', CallStatus: 'busy' }));
  t.equal(forgedBusy.status, 200, "a callback naming another carrier call is taken, and not passed on (else the call would end busy before the real one's end)");
  t.equal((await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: carrierCallId, CallStatus: 'completed' }))).status, 200, 'completed, told to A');
  const call = await ended(s, b, callId);
  t.equal(call.status, 'completed', 'B ended it as the carrier said');
  t.equal(call.type, 'outbound');
  const forged = await b.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: 'CAforged', CallStatus: 'busy' }));
  t.equal(forged.status, 200, 'a callback for an ended call is taken and ignored');
  phone.phone.hangUp();
});
