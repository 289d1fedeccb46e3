import { once } from 'node:events';
import t from 'tap';
import { createLoopbackCarrier, type LoopbackDial } from '../runtime/calls/carriers/loopback.js';
import { startFakeTwilio } from './fakes/twilio.js';
import { startTestPlatform } from './helpers/platform.js';
import { SimulatedPhone } from './helpers/phone.js';
import { startSite } from './helpers/site.js';
import { LONG_GREETING, callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * Controlling and watching a live call:
 * 1. The owner hangs up a live Twilio call: 200 with the call `ended`, its duration, charge,
 *    recording, transcript and webhook saved; Twilio's REST API is told to complete the call and
 *    the media stream closes. Again → 422; another owner's or an unknown call → 404.
 * 2. A browser call hung up by its owner: the socket closes with 1000 and the reason.
 * 3. An outbound call hung up while it rings: `ended`, nothing charged, the carrier cancels it.
 * 4. A live call read while it runs: its duration grows with the clock and its transcript is the
 *    conversation so far.
 * 5. A call's events after a tool call, an interruption and turns: start, statuses, turns with
 *    offsets, the interruption that stood, the tool call (name, duration, ok; never its
 *    arguments), latencies and the end, in order and paginated.
 * 6. A wordless sound over the agent: interruption events `paused`, then `resumed`.
 * 7. Another process on the same database: it reads the live call with the transcript its holder
 *    wrote with a heartbeat, and hangs it up (the holder is asked through PostgreSQL).
 */

const SID = 'AC00000000000000000000000000000001';
const AUTH = 'twilio-auth-token';

t.test('the owner hangs up a live Twilio call: ended, saved like any other end, hung up at Twilio', async (t) => {
  const fake = await startFakeTwilio(t, SID, AUTH);
  const hook = await startSite(t);
  hook.route('/hook', { type: 'application/json', body: '{"ok":true}' });
  const s = await voiceSetup(t, { record: true, webhook_url: `${hook.origin}/hook`, is_webhook_active: true }, {
    config: { twilio: { accountSid: SID, authToken: AUTH, apiUrl: fake.apiUrl }, outboundAllowPrivate: true },
  });
  const { phone, callId } = await callIn(s, ['What are your opening hours?']);
  await phone.untilAgentDone();
  await phone.turn(1_000);
  await phone.silence(2_000);
  const closed = once(phone.phone.socket, 'close');
  const balanceBefore = (await s.api.request('GET', '/user', { token: s.token })).body.data.balance as number;

  const hungUp = await s.api.request('POST', `/user/calls/${callId}/hangup`, { token: s.token });
  t.equal(hungUp.status, 200);
  t.equal(hungUp.body.message, 'Call ended successfully');
  const call = hungUp.body.data;
  t.equal(call.id, callId);
  t.equal(call.status, 'ended');
  t.ok(call.duration >= 4, `duration ${call.duration} s`);
  t.ok(call.total_cost > 0, `charged ${call.total_cost}`);
  t.match(call.recording_url, /\/api\/recordings\/\d+\.wav\?expires=/);
  t.equal(call.transcript, 'assistant: Hello, this is Bot.\nuser: What are your opening hours?\nassistant: Thanks for your message. You wrote: "What are your opening hours?"');
  t.same(await endedCall(s, callId), call, 'the end as saved');
  const balanceAfter = (await s.api.request('GET', '/user', { token: s.token })).body.data.balance as number;
  t.ok(Math.abs(balanceBefore - call.total_cost - balanceAfter) < 1e-6, 'the charge is on the ledger');
  const [code] = await closed;
  t.equal(code, 1000, 'the media stream closed');
  const callSid = `CA${'1'.padStart(32, '0')}`;
  await fake.answered(() => fake.requests.some((r) => r.path.endsWith(`/Calls/${callSid}.json`)));
  const update = fake.requests.find((r) => r.path.endsWith(`/Calls/${callSid}.json`))!;
  t.equal(update.form.get('Status'), 'completed', 'Twilio is told to end the call');
  await hook.requested('/hook');
  const deliveries = await s.api.request('GET', `/user/webhook-deliveries?call_id=${callId}`, { token: s.token });
  t.equal(deliveries.body.data.length, 1, 'its webhook went out');
  const events = (await s.api.request('GET', `/user/calls/${callId}/events`, { token: s.token })).body.data as Array<{ type: string; data: Record<string, unknown> }>;
  t.same(events.at(-1)!.data, { status: 'ended', duration: call.duration, reason: 'hangup' }, 'the end event says the owner hung up');

  const again = await s.api.request('POST', `/user/calls/${callId}/hangup`, { token: s.token });
  t.equal(again.status, 422);
  t.same(again.body, { message: 'The call has already ended.', errors: { id: ['The call has already ended.'] } });
  const stranger = await s.api.user();
  const theirs = await s.api.request('POST', `/user/calls/${callId}/hangup`, { token: stranger.token });
  t.equal(theirs.status, 404);
  t.same(theirs.body, { message: 'Call not found' });
  t.same((await s.api.request('POST', '/user/calls/999999/hangup', { token: s.token })).body, { message: 'Call not found' });
  t.equal((await s.api.request('POST', '/user/calls/abc/hangup', { token: s.token })).status, 404);
  t.equal((await s.api.request('POST', `/user/calls/${callId}/hangup`)).status, 401);
  t.equal((await s.api.request('GET', `/user/calls/${callId}/events`, { token: stranger.token })).status, 404, "another owner's events are not found");
});

t.test("a browser call hung up by its owner: the socket closes saying why", async (t) => {
  const s = await voiceSetup(t, { type: 'outbound', phone_number_id: null });
  const created = await s.api.request('POST', '/web-calls', { body: { assistant_id: s.assistantUuid } });
  const callId = created.body.call_id as number;
  const phone = await SimulatedPhone.webCall(created.body.websocket_url, s.clock);
  await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
  await phone.silence(1_200);
  const closed = once(phone.phone.socket, 'close');
  const hungUp = await s.api.request('POST', `/user/calls/${callId}/hangup`, { token: s.token });
  t.equal(hungUp.status, 200);
  t.equal(hungUp.body.data.status, 'ended');
  t.equal(hungUp.body.data.type, 'web');
  t.ok(hungUp.body.data.duration >= 1);
  const [code, reason] = await closed;
  t.equal(code, 1000);
  t.equal(String(reason), 'call ended by its owner');
});

t.test('an outbound call hung up while it rings: ended, nothing charged, the carrier cancels it', async (t) => {
  const dialed: LoopbackDial[] = [];
  const carrier = createLoopbackCarrier((call) => dialed.push(call));
  const s = await voiceSetup(t, { type: 'outbound' }, { runtime: { carrier } });
  const callId = (await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+4915112345678' } })).body.data.id as number;
  await s.api.platform.runtime.services.voice.saved(callId);
  t.equal(dialed.length, 1);
  const hungUp = await s.api.request('POST', `/user/calls/${callId}/hangup`, { token: s.token });
  t.equal(hungUp.status, 200);
  t.match(hungUp.body.data, { status: 'ended', duration: 0, total_cost: 0 });
  t.same(carrier.hangUps, [{ carrierCallId: dialed[0]!.carrierCallId, state: 'ringing' }], 'the phone stops ringing');
});

t.test('a live call shows its duration and transcript so far', async (t) => {
  const s = await voiceSetup(t);
  const { phone, callId } = await callIn(s, ['Do you deliver on Sundays?']);
  await phone.untilAgentDone();
  const read = async () => (await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data;
  const first = await read();
  t.equal(first.status, 'in-progress');
  t.equal(first.transcript, 'assistant: Hello, this is Bot.');
  await phone.turn(1_000);
  await phone.silence(3_000);
  const later = await read();
  t.ok(later.duration >= first.duration + 4, `duration grew from ${first.duration} to ${later.duration} s`);
  t.equal(later.transcript, 'assistant: Hello, this is Bot.\nuser: Do you deliver on Sundays?\nassistant: Thanks for your message. You wrote: "Do you deliver on Sundays?"');
  phone.phone.hangUp();
  const ended = await endedCall(s, callId);
  t.ok(ended.duration >= later.duration, 'the end keeps counting from the same answer');
});

t.test("a call's events: turns, an interruption, a tool call, latencies, in order", async (t) => {
  const site = await startSite(t);
  site.route('/orders', { type: 'application/json', body: JSON.stringify({ status: 'shipped' }) });
  const s = await voiceSetup(t, { initial_message: LONG_GREETING }, { config: { outboundAllowPrivate: true } });
  const tool = await s.api.request('POST', '/user/tools', {
    token: s.token,
    body: { name: 'check_order', description: 'Looks up an order', endpoint: `${site.origin}/orders`, method: 'GET', timeout: 5, schema: [{ name: 'order_id', type: 'string', description: 'The order id' }] },
  });
  await s.api.request('PUT', `/user/assistant/${s.assistantId}`, { token: s.token, body: { tool_ids: [tool.body.data.id] } });
  const { phone, callId } = await callIn(s, ['wait, stop please', 'Please check order A-17 for Ada Lovelace.']);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(800);
  await phone.until(() => phone.heard.clears === 1, 1_000, 'the barge-in');
  const afterClear = phone.heard.speechFrames;
  await phone.until(() => phone.heard.speechFrames > afterClear + 10, 5_000, 'the answer');
  await phone.untilAgentDone();
  await phone.turn(1_000);
  await site.requested('/orders');
  await phone.untilAgentDone();
  // Written with the heartbeats while the call is live.
  await phone.silence(1_500);
  await s.api.platform.runtime.services.voice.saved(callId);
  phone.phone.hangUp();
  await endedCall(s, callId);

  const listed = await s.api.request('GET', `/user/calls/${callId}/events?per_page=500`, { token: s.token });
  t.equal(listed.status, 200);
  const events = listed.body.data as Array<{ type: string; at: string; offset_ms: number; data: Record<string, any> }>;
  t.equal(listed.body.total, events.length);
  const kinds = events.map((e) => (e.type === 'turn' ? `turn:${e.data.role}` : e.type === 'interruption' ? `interruption:${e.data.state}` : e.type === 'status' ? `status:${e.data.status}` : e.type === 'latency' ? `latency:${e.data.metric}` : e.type));
  t.same(kinds.filter((k) => !k.startsWith('latency')), [
    'start',
    'status:ringing',
    'status:in-progress',
    // Words that take the turn: the interruption stands at once, without a pause first.
    'interruption:stood',
    'turn:assistant',
    'turn:user',
    'turn:assistant',
    'turn:user',
    'tool_call',
    'turn:assistant',
    'end',
  ], kinds.join(', '));
  t.ok(kinds.filter((k) => k === 'latency:voice_to_voice').length >= 2, 'voice-to-voice latency per answered turn');
  t.ok(kinds.includes('latency:llm_first_token'), 'the model\'s first token');
  for (let i = 1; i < events.length; i++) {
    t.ok(events[i]!.offset_ms >= events[i - 1]!.offset_ms && events[i]!.at >= events[i - 1]!.at, `event ${i} not before the one before it`);
  }
  t.match(events[0], { type: 'start', offset_ms: 0, data: { type: 'inbound', mode: 'pipeline' } });
  t.match(events[0]!.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
  const turns = events.filter((e) => e.type === 'turn');
  t.ok(LONG_GREETING.startsWith(turns[0]!.data.text) && turns[0]!.data.text.length < LONG_GREETING.length, 'the greeting as heard, cut');
  t.same(turns[1]!.data.text, 'wait, stop please');
  for (const turn of turns) t.ok(turn.data.start_offset_ms <= turn.data.end_offset_ms && turn.data.end_offset_ms <= turn.offset_ms, `turn "${turn.data.text.slice(0, 20)}" spans ${turn.data.start_offset_ms}-${turn.data.end_offset_ms} ms`);
  t.ok(turns[1]!.data.end_offset_ms - turns[1]!.data.start_offset_ms >= 600, 'the caller spoke for most of 800 ms');
  const toolCall = events.find((e) => e.type === 'tool_call')!;
  t.same(Object.keys(toolCall.data).sort(), ['duration_ms', 'name', 'ok']);
  t.match(toolCall.data, { name: 'check_order', ok: true, duration_ms: Number });
  t.notMatch(JSON.stringify(events.filter((e) => e.type !== 'turn')), /Ada|A-17/, 'no argument values outside the turns');
  t.match(events.at(-1), { type: 'end', data: { status: 'ended_by_customer', reason: null } });

  const paged = await s.api.request('GET', `/user/calls/${callId}/events?per_page=2&page=2`, { token: s.token });
  t.match(paged.body, { current_page: 2, per_page: 2, total: events.length, from: 3, to: 4 });
  t.same(paged.body.data, events.slice(2, 4));
});

t.test('a wordless sound over the agent: the interruption events say it paused and resumed', async (t) => {
  const s = await voiceSetup(t, { initial_message: LONG_GREETING });
  // Unscripted: the dev transcriber gives no words, so the utterance is judged by its length.
  const { phone, callId } = await callIn(s);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(600);
  await phone.untilAgentDone(1_000);
  phone.phone.hangUp();
  await endedCall(s, callId);
  const events = (await s.api.request('GET', `/user/calls/${callId}/events`, { token: s.token })).body.data as Array<{ type: string; data: Record<string, unknown> }>;
  t.same(events.filter((e) => e.type === 'interruption').map((e) => e.data.state), ['paused', 'resumed']);
  t.same(events.filter((e) => e.type === 'turn').map((e) => e.data.text), [LONG_GREETING], 'the greeting said whole, the sound no turn');
});

t.test('another process reads the live call and hangs it up; the one holding it ends it', async (t) => {
  const s = await voiceSetup(t);
  const other = await startTestPlatform(t, { databaseUrl: s.api.databaseUrl }, { clock: s.clock });
  const { phone, callId } = await callIn(s, ['Is the shop open today?']);
  await phone.untilAgentDone();
  await phone.turn(1_000);
  const expected = 'assistant: Hello, this is Bot.\nuser: Is the shop open today?\nassistant: Thanks for your message. You wrote: "Is the shop open today?"';
  const readThere = async () => (await other.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data;
  // The holder writes the transcript with its next heartbeat (each simulated second).
  let seen = await readThere();
  for (let i = 0; i < 50 && seen.transcript !== expected; i++) {
    await phone.silence(200);
    seen = await readThere();
  }
  t.equal(seen.status, 'in-progress');
  t.equal(seen.transcript, expected, 'the transcript as of the last heartbeat');
  const here = (await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data;
  t.equal(seen.duration, here.duration, 'the same duration so far on either process');
  t.ok(seen.duration >= 2, `duration ${seen.duration} s`);

  const closed = once(phone.phone.socket, 'close');
  const hungUp = await other.request('POST', `/user/calls/${callId}/hangup`, { token: s.token });
  t.equal(hungUp.status, 200);
  t.equal(hungUp.body.message, 'Call ended successfully');
  t.match(hungUp.body.data, { id: callId, status: 'ended', transcript: expected });
  t.ok(hungUp.body.data.total_cost > 0);
  await closed;
  t.equal(s.api.platform.runtime.services.voice.session(callId), undefined, 'the holder no longer has it');
});
