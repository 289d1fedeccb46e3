import t, { type Test } from 'tap';
import { createLoopbackCarrier } from '../runtime/calls/carriers/loopback.js';
import { LOOPBACK_BEEP_GAP_MS, LOOPBACK_BEEP_MS, LOOPBACK_GREETING_MS, LOOPBACK_RING_MS } from '../runtime/calls/carriers/loopbackCallee.js';
import { endedCall, voiceSetup, type VoiceSetup } from './helpers/voice.js';

/**
 * The loopback carrier's simulated callee, by the number dialled (`POST /api/user/calls` on a
 * platform with no carrier configured, on a manual clock):
 * 1. `…0001` is busy: the call ends `busy`, never answered, nothing charged.
 * 2. `…0003` fails: the call ends `failed`.
 * 3. `…0002` rings and is not answered: `ringing` at once, still ringing just before the ring
 *    time, `no-answer` at it (reported by the carrier: the assistant's own ringing_time is longer).
 * 4. `…0004` is an answering machine: answered_by `machine`, and the assistant's voicemail message
 *    is spoken once the greeting is over, then the assistant hangs up (after the beep).
 * 5. `…0004` with no voicemail message (end_call_on_voicemail at its default): the call ends as
 *    soon as the greeting tells a machine, before the beep.
 * 6. Any other number answers silently: in-progress until its owner hangs up, answered_by `unknown`.
 * 7. The carrier keeps its latest 1,000 hang-ups (and transfers), not every one of a long run.
 */

async function place(t: Test, s: VoiceSetup, number: string): Promise<number> {
  const placed = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: number } });
  t.equal(placed.status, 201);
  return placed.body.data.id as number;
}

const session = (s: VoiceSetup, callId: number) => s.api.platform.runtime.services.voice.session(callId);
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Waits, without moving the clock, until the call's status is `status` and saved (the callee's socket and the carrier's reports are real I/O). */
async function untilStatus(s: VoiceSetup, callId: number, status: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (session(s, callId)?.currentStatus !== status) {
    if (Date.now() > deadline) throw new Error(`call ${callId} never reached ${status} (it is ${session(s, callId)?.currentStatus})`);
    await nextTurn();
  }
  // And saved, so the API reads it too.
  await s.api.platform.runtime.services.voice.saved(callId);
}

/**
 * Moves the clock 20 ms at a time, each step once the callee's frame of it has reached the
 * platform (`settled`), until `done` holds; fails after `maxMs` of simulated time.
 * @returns the simulated milliseconds it took.
 */
async function stepUntil(s: VoiceSetup, done: () => boolean, maxMs: number, what: string): Promise<number> {
  let elapsed = 0;
  while (!done()) {
    if (elapsed >= maxMs) throw new Error(`${what} not reached within ${maxMs} ms of simulated time`);
    s.clock.advance(20);
    elapsed += 20;
    await s.clock.settled();
    await nextTurn();
  }
  return elapsed;
}

t.test('a number ending in 0001 is busy', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound' });
  const callId = await place(t, s, '+14155550001');
  const call = await endedCall(s, callId);
  t.match(call, { status: 'busy', answered_by: null, duration: 0, total_cost: 0, transcript: '' });
});

t.test('a number ending in 0003 fails', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound' });
  const callId = await place(t, s, '+4930123450003');
  t.match(await endedCall(s, callId), { status: 'failed', answered_by: null, duration: 0 });
});

t.test('a number ending in 0002 rings and is not answered: no-answer after the ring time', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound', ringing_time: 60 });
  const callId = await place(t, s, '+14155550002');
  await untilStatus(s, callId, 'ringing');
  t.equal((await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data.status, 'ringing');
  s.clock.advance(LOOPBACK_RING_MS - 20);
  await nextTurn();
  t.equal(session(s, callId)?.currentStatus, 'ringing', 'still ringing just before the ring time');
  s.clock.advance(20);
  const call = await endedCall(s, callId);
  t.match(call, { status: 'no-answer', answered_by: null, duration: 0, total_cost: 0 });
});

t.test('a number ending in 0004 is an answering machine: the voicemail message is left', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound', voice_mail_message: 'Please call us back about your order.' });
  const callId = await place(t, s, '+14155550004');
  await untilStatus(s, callId, 'in-progress');
  const took = await stepUntil(s, () => !session(s, callId)?.live, 40_000, 'the message and hang-up');
  const call = await endedCall(s, callId);
  t.match(call, { status: 'ended_by_assistant', answered_by: 'machine' });
  t.match(call.transcript, /assistant: Please call us back about your order\.$/, 'the message is spoken');
  const events = (await s.api.request('GET', `/user/calls/${callId}/events?per_page=100`, { token: s.token })).body.data as Array<{ type: string; data: Record<string, any> }>;
  const message = events.find((event) => event.type === 'turn' && event.data.role === 'assistant' && /call us back/.test(String(event.data.text)));
  t.ok(message && message.data.start_offset_ms >= LOOPBACK_GREETING_MS, `the message starts once the greeting is over (at ${message?.data.start_offset_ms} ms)`);
  const beep = events.find((event) => event.type === 'turn' && event.data.role === 'user' && event.data.start_offset_ms >= LOOPBACK_GREETING_MS + LOOPBACK_BEEP_GAP_MS);
  t.ok(beep && beep.data.end_offset_ms - beep.data.start_offset_ms <= LOOPBACK_BEEP_MS + 100, 'the beep is heard, after the greeting and its pause');
  t.ok(took >= LOOPBACK_GREETING_MS + LOOPBACK_BEEP_GAP_MS + LOOPBACK_BEEP_MS, `the hang-up comes after the beep (${took} ms)`);
});

t.test('a number ending in 0004 with no voicemail message: the call ends once the greeting tells a machine', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound' });
  const callId = await place(t, s, '+14155550004');
  await untilStatus(s, callId, 'in-progress');
  const took = await stepUntil(s, () => !session(s, callId)?.live, 30_000, 'the hang-up');
  t.ok(took > 3_500 && took < LOOPBACK_GREETING_MS + LOOPBACK_BEEP_GAP_MS, `ended after the greeting, before the beep (${took} ms)`);
  const call = await endedCall(s, callId);
  t.match(call, { status: 'ended_by_assistant', answered_by: 'machine' });
  t.notMatch(call.transcript, /call us back/);
});

t.test('any other number answers silently, as before', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound' });
  const callId = await place(t, s, '+14155550123');
  await untilStatus(s, callId, 'in-progress');
  let elapsed = 0;
  await stepUntil(s, () => (elapsed += 20) > 8_000, 10_000, 'eight seconds');
  t.equal(session(s, callId)?.currentStatus, 'in-progress', 'still on the line after eight seconds of silence');
  const hungUp = await s.api.request('POST', `/user/calls/${callId}/hangup`, { token: s.token });
  t.equal(hungUp.status, 200);
  t.match(hungUp.body.data, { status: 'ended', answered_by: 'unknown' });
  t.match(hungUp.body.data.transcript, /^assistant: Hello, this is Bot\./, 'the greeting was spoken to it');
});

t.test('the carrier keeps its latest 1,000 hang-ups and transfers', async (t) => {
  const carrier = createLoopbackCarrier(() => {});
  for (let i = 0; i < 1_005; i++) {
    await carrier.hangUp(`LB${i}`, 'ringing');
    await carrier.transfer(`LB${i}`, '+14155550100');
  }
  t.equal(carrier.hangUps.length, 1_000);
  t.same([carrier.hangUps[0]!.carrierCallId, carrier.hangUps.at(-1)!.carrierCallId], ['LB5', 'LB1004'], 'the oldest go first');
  t.equal(carrier.transfers.length, 1_000);
});
