import { sql } from 'slonik';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { CARRIER_RIGS, type CarrierRig, type PlacedCall } from './helpers/carriers.js';
import { agentBusy, endedCall, voiceSetup, type VoiceSetup } from './helpers/voice.js';

/**
 * The same calls over every carrier (a row per carrier: Twilio, Telnyx, Vonage, Plivo), each
 * through a fake of the carrier speaking its wire protocols (REST API, signed webhooks,
 * media-stream phone):
 * 1. A number records its carrier; another carrier's webhook for it finds no assistant. A number
 *    rented naming a carrier records that one; an unknown carrier is refused (422).
 * 2. An inbound call: the signed voice webhook is answered with markup, the carrier's phone joins
 *    the stream it names, hears the greeting, speaks, hears the answer and hangs up; the call ends
 *    with its transcript and cost.
 * 3. The built-in call_transfer tool redirects the live call through the carrier's REST API.
 * 4. Webhooks and callbacks whose signature is missing, wrong or stale are refused (403) and
 *    change nothing.
 * 5. An outbound call: the create request carries the markup that connects the stream and the
 *    callback URLs; ringing and answered callbacks move it, the carrier's phone joins, a turn, and
 *    the carrier's `completed` ends it.
 * 6. An outbound call still ringing after ringing_time is given up and hung up at the carrier.
 * 7. The carrier's answering-machine verdict: a machine is hung up on (answered_by machine).
 * 8. A busy callback ends a call that never connected.
 */

const CALLER = '+14155550199';
const CALLEE = '+4915112345678';
const TRANSFER_TO = '+14155550123';

/** The carrier's inbound call to the setup's number, joined by its phone. */
async function callIn(t: Test, rig: CarrierRig, s: VoiceSetup, script: string[]) {
  const carrierCallId = rig.callSid();
  const answer = await rig.inbound(s.api, { to: s.number, from: CALLER, carrierCallId });
  t.equal(answer.status, 200, 'the voice webhook is answered');
  t.match(answer.headers.get('content-type'), rig.markupType);
  // A JSON answer (Vonage's NCCO) arrives parsed; markup is handed to the carrier's phone as text.
  const markup = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
  const { phone, callId } = await rig.connect(markup, { carrierCallId, from: CALLER, to: s.number }, s.clock);
  s.scripts.set(callId, script);
  phone.busy = agentBusy(s, callId);
  return { phone, callId, carrierCallId };
}

/** An outbound call placed through the API, as the carrier was asked to place it. */
async function callOut(s: VoiceSetup, rig: CarrierRig): Promise<{ callId: number; placed: PlacedCall }> {
  const before = rig.placed().length;
  const response = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: CALLEE } });
  if (response.status !== 201) throw new Error(`placing failed: ${response.status} ${JSON.stringify(response.body)}`);
  const callId = response.body.data.id as number;
  await rig.answered(() => rig.placed().length > before);
  await s.api.platform.runtime.services.voice.saved(callId);
  return { callId, placed: rig.placed()[before]! };
}

/** The carrier each of the setup user's numbers records (not part of the API's number views). */
async function carriersOf(s: VoiceSetup): Promise<Map<string, string>> {
  const rows = await s.api.platform.runtime.pool.any(sql.type(z.object({ phone_number: z.string(), carrier: z.string() }))`
    SELECT phone_number, carrier FROM phone_numbers WHERE user_id = ${s.userId}`);
  return new Map(rows.map((row) => [row.phone_number, row.carrier]));
}

const liveStatus = (s: VoiceSetup, callId: number) => s.api.platform.runtime.services.voice.session(callId)?.currentStatus;

for (const row of CARRIER_RIGS) {
  t.test(`${row.name}: inbound calls`, async (t) => {
    const rig = await row.start(t);
    const s = await voiceSetup(t, { tools: [{ type: 'call_transfer', phone_number: TRANSFER_TO, description: 'To a human' }] }, { config: rig.config });

    await t.test('the number records its carrier; another carrier finds no assistant on it', async (t) => {
      t.equal((await carriersOf(s)).get(s.number), rig.name);
      const other = CARRIER_RIGS.find((r) => r.name !== rig.name)!.name;
      // The other carrier has no key configured here: its unsigned webhook is taken, and finds nothing.
      const answer = await s.api.request('POST', `/telephony/${other}/inbound`, { raw: new URLSearchParams({ To: s.number, From: CALLER, CallSid: 'CA-elsewhere' }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      t.equal(answer.status, 200);
      t.match(answer.body, /<Say>[^<]+<\/Say><Hangup\/>/);
      t.notMatch(answer.body, /<Stream/);
    });

    await t.test('a number rented naming a carrier records that carrier; an unknown one is refused', async (t) => {
      const offers = (await s.api.request('GET', '/user/phone-numbers/search?country_code=US', { token: s.token })).body.data as Array<{ phone_number: string }>;
      const other = CARRIER_RIGS.find((r) => r.name !== rig.name)!.name;
      const [mine, theirs, unknown] = offers.map((offer) => offer.phone_number).filter((number) => number !== s.number);
      for (const [number, carrier] of [[mine, rig.name], [theirs, other]] as const) {
        const bought = await s.api.request('POST', '/user/phone-numbers/purchase', { token: s.token, body: { phone_number: number, carrier } });
        t.equal(bought.status, 201, `rented from ${carrier}`);
        t.match(bought.body.data, { phone_number: number });
      }
      const refused = await s.api.request('POST', '/user/phone-numbers/purchase', { token: s.token, body: { phone_number: unknown, carrier: 'acme' } });
      t.equal(refused.status, 422);
      t.ok(refused.body.errors.carrier, 'the carrier field is named');
      const carriers = await carriersOf(s);
      t.same([carriers.get(mine!), carriers.get(theirs!), carriers.has(unknown!)], [rig.name, other, false]);
    });

    await t.test('webhook, markup, stream, greeting, a turn, hang-up: ended with transcript and cost', async (t) => {
      const { phone, callId } = await callIn(t, rig, s, ['What are your opening hours?']);
      await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
      await phone.untilAgentDone();
      t.ok(phone.heard.marks.length > 0, 'the carrier echoed the marks');
      await phone.talk(800);
      await phone.until(() => phone.heard.speechFrames > 120, 5_000, 'the answer');
      await phone.untilAgentDone();
      phone.phone.hangUp();
      const call = await endedCall(s, callId);
      t.match(call, { type: 'inbound', status: 'ended_by_customer', client_phone_number: CALLER, assistant_phone_number: s.number });
      t.equal(call.transcript, 'assistant: Hello, this is Bot.\nuser: What are your opening hours?\nassistant: Thanks for your message. You wrote: "What are your opening hours?"');
      t.ok(call.duration > 0 && call.total_cost > 0 && call.carrier_cost > 0, `charged: ${call.total_cost} for ${call.duration} s`);
      t.same(rig.updates(), [], 'a call the caller hung up needs nothing of the carrier');
    });

    await t.test('call_transfer redirects the call through the carrier', async (t) => {
      const { phone, callId, carrierCallId } = await callIn(t, rig, s, ['Please transfer call to a human.']);
      await phone.untilAgentDone();
      await phone.talk(800);
      await phone.until(() => phone.closed, 10_000, 'the end of the call');
      t.equal((await endedCall(s, callId)).status, 'completed', 'a transferred call is completed');
      t.match(rig.updates(), [{ carrierCallId, dial: TRANSFER_TO }]);
      t.notOk(rig.updates()[0]!.status, 'redirected, not hung up');
    });

    await t.test('webhooks with a missing, wrong or stale signature are refused', async (t) => {
      for (const signing of rig.refused) {
        const refused = await rig.inbound(s.api, { to: s.number, from: CALLER, carrierCallId: rig.callSid() }, signing);
        t.same([refused.status, refused.body], [403, { message: `The ${rig.name[0]!.toUpperCase()}${rig.name.slice(1)} signature does not match.` }], `inbound, ${signing}`);
      }
      const { phone, callId, carrierCallId } = await callIn(t, rig, s, []);
      await phone.until(() => phone.heard.speechFrames > 5, 2_000, 'the greeting');
      for (const signing of rig.refused) {
        const refused = await rig.status(s.api, callId, { carrierCallId, status: 'completed' }, signing);
        t.equal(refused.status, 403, `status callback, ${signing}`);
      }
      t.equal(liveStatus(s, callId), 'in-progress', 'the call goes on');
      phone.phone.hangUp();
      t.equal((await endedCall(s, callId)).status, 'ended_by_customer');
    });
  });

  t.test(`${row.name}: outbound calls`, async (t) => {
    const rig = await row.start(t);
    const s = await voiceSetup(t, { type: 'outbound', ringing_time: 10 }, { config: rig.config });

    await t.test('placed with the markup that connects the stream; ringing, answered, a turn, completed', async (t) => {
      const { callId, placed } = await callOut(s, rig);
      const statusUrl = `${s.api.origin}/api/telephony/${rig.name}/status?call_id=${callId}`;
      t.match(placed, { to: CALLEE, from: s.number, statusUrl, amdUrl: statusUrl });
      t.equal((await rig.status(s.api, callId, { carrierCallId: placed.carrierCallId, status: 'ringing' })).status, 200);
      t.equal(liveStatus(s, callId), 'ringing');
      const { phone } = await rig.connect(placed.markup, { carrierCallId: placed.carrierCallId, from: s.number, to: CALLEE }, s.clock);
      s.scripts.set(callId, ['Hi, who is this?']);
      phone.busy = agentBusy(s, callId);
      await rig.status(s.api, callId, { carrierCallId: placed.carrierCallId, status: 'in-progress' });
      await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
      t.equal(liveStatus(s, callId), 'in-progress');
      await phone.untilAgentDone();
      await phone.talk(800);
      await phone.until(() => phone.heard.speechFrames > 120, 5_000, 'the answer');
      await phone.untilAgentDone();
      await rig.status(s.api, callId, { carrierCallId: placed.carrierCallId, status: 'completed' });
      const call = await endedCall(s, callId);
      t.match(call, { type: 'outbound', status: 'completed', client_phone_number: CALLEE, assistant_phone_number: s.number, answered_by: 'human' });
      t.match(call.transcript, /\nuser: Hi, who is this\?\n/);
      await phone.until(() => phone.closed, 1_000, 'the stream closed');
      t.same(rig.updates(), [], 'a call the carrier completed is not hung up there');
    });

    await t.test('given up after ringing_time: hung up at the carrier', async (t) => {
      const { callId, placed } = await callOut(s, rig);
      await rig.status(s.api, callId, { carrierCallId: placed.carrierCallId, status: 'ringing' });
      s.clock.advance(10_100);
      t.equal((await endedCall(s, callId)).status, 'no-answer');
      await rig.answered(() => rig.updates().length > 0);
      t.match(rig.updates(), [{ carrierCallId: placed.carrierCallId, status: rig.ringingHangUp }]);
      t.notOk(rig.updates()[0]!.dial);
    });

    await t.test("the carrier's answering-machine verdict: a machine is hung up on", async (t) => {
      const { callId, placed } = await callOut(s, rig);
      const { phone } = await rig.connect(placed.markup, { carrierCallId: placed.carrierCallId, from: s.number, to: CALLEE }, s.clock);
      await phone.until(() => phone.heard.speechFrames > 5, 2_000, 'the greeting');
      await rig.status(s.api, callId, { carrierCallId: placed.carrierCallId, answeredBy: 'machine_end_beep' });
      await phone.until(() => phone.closed, 2_000, 'the hang-up on voicemail');
      t.match(await endedCall(s, callId), { status: 'ended_by_assistant', answered_by: 'machine' });
    });

    await t.test('a busy callback ends a call that never connected; refused signatures change nothing first', async (t) => {
      const { callId, placed } = await callOut(s, rig);
      for (const signing of rig.refused) t.equal((await rig.status(s.api, callId, { carrierCallId: placed.carrierCallId, status: 'busy' }, signing)).status, 403, signing);
      t.equal(liveStatus(s, callId), 'initiated');
      await rig.status(s.api, callId, { carrierCallId: placed.carrierCallId, status: 'busy' });
      t.equal((await endedCall(s, callId)).status, 'busy');
    });
  });
}
