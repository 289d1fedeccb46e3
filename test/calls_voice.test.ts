import t, { type Test } from 'tap';
import { withClient } from './helpers/database.js';
import { ADMIN_TOKEN } from './helpers/platform.js';
import { callIn, endedCall, voiceSetup, type VoiceSetup } from './helpers/voice.js';

/**
 * Voice calls end to end over real sockets with the dev speech providers and the dev model, on a
 * manual clock: the inbound Twilio flow, the greeting, a caller turn answered, the transcript of
 * what was heard, hang-up.
 */

t.test('an inbound call: TwiML, greeting, a turn answered, hang-up, the call record', async (t) => {
  const s = await voiceSetup(t);
  const form = new URLSearchParams({ To: s.number, From: '+14155550199', CallSid: 'CA0001' });
  const answer = await s.api.request('POST', '/telephony/twilio/inbound', { raw: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.equal(answer.status, 200);
  t.match(answer.headers.get('content-type'), /text\/xml/);
  t.match(String(answer.body), /<Connect><Stream url="ws:\/\/127\.0\.0\.1:\d+\/ws\/telephony\/twilio"><Parameter name="call_id" value="\d+"\/><Parameter name="token" value="[^"]+"\/><\/Stream><\/Connect>/);
  const ringingId = Number(/name="call_id" value="(\d+)"/.exec(String(answer.body))![1]);
  const ringing = await s.api.request('GET', `/user/calls/${ringingId}`, { token: s.token });
  t.equal(ringing.body.data.status, 'ringing');
  t.equal(ringing.body.data.type, 'inbound');
  t.equal(ringing.body.data.client_phone_number, '+14155550199');
  t.equal(ringing.body.data.assistant_phone_number, s.number);

  const { phone, callId } = await callIn(s, ['What are your opening hours?']);
  await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
  await s.api.platform.runtime.services.voice.saved(callId);
  const live = await s.api.request('GET', `/user/calls/${callId}`, { token: s.token });
  t.equal(live.body.data.status, 'in-progress');
  await phone.untilAgentDone();
  t.ok(phone.heard.marks.length > 0, 'marks went out and came back');
  const greetingFrames = phone.heard.speechFrames;
  await phone.talk(1_000);
  await phone.until(() => phone.heard.speechFrames > greetingFrames + 10, 5_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const ended = await endedCall(s, callId);
  t.equal(ended.status, 'ended_by_customer');
  t.equal(ended.answered_by, 'human');
  t.equal(ended.transcript, 'assistant: Hello, this is Bot.\nuser: What are your opening hours?\nassistant: Thanks for your message. You wrote: "What are your opening hours?"');
  t.ok(ended.duration >= 2, `duration ${ended.duration}`);
});

t.test("the caller's words right before hanging up are in the transcript", async (t) => {
  const s = await voiceSetup(t);
  const { phone, callId } = await callIn(s, ['Cancel my order 12345 please']);
  await phone.untilAgentDone();
  await phone.talk(1_500);
  phone.phone.hangUp();
  t.equal((await endedCall(s, callId)).transcript, 'assistant: Hello, this is Bot.\nuser: Cancel my order 12345 please');

  const backchannel = await callIn(s, ['Mm-hmm.']);
  await backchannel.phone.untilAgentDone();
  await backchannel.phone.talk(600);
  backchannel.phone.phone.hangUp();
  t.equal((await endedCall(s, backchannel.callId)).transcript, 'assistant: Hello, this is Bot.', 'a last "mm-hmm" is not kept, as a turn would not be');
});

t.test('an unknown number gets TwiML that says so and hangs up; no call is created', async (t) => {
  const s = await voiceSetup(t);
  const form = new URLSearchParams({ To: '+19995550000', From: '+14155550199', CallSid: 'CA0002' });
  const answer = await s.api.request('POST', '/telephony/twilio/inbound', { raw: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.equal(answer.status, 200);
  t.match(String(answer.body), /<Say>The number you have called is not connected to an assistant\. Goodbye\.<\/Say><Hangup\/>/);
  const calls = await s.api.request('GET', '/user/calls', { token: s.token });
  t.equal(calls.body.total, 0);
});

t.test('a rented number is renewed monthly; unpaid it lapses and takes no calls until its owner can pay', async (t) => {
  const s = await voiceSetup(t);
  const phoneNumbers = s.api.platform.runtime.services.phoneNumbers;
  const balance = async () => Number((await s.api.request('GET', '/user', { token: s.token })).body.data.balance);
  const monthEnded = () => withClient(s.api.databaseUrl, (db) => db.query(`UPDATE phone_numbers SET paid_until = now() - interval '1 minute' WHERE id = $1`, [s.numberId]));
  const owned = async () => (await s.api.request('GET', '/user/phone-numbers/all', { token: s.token })).body.data.find((n: { id: number }) => n.id === s.numberId);
  const webhook = (sid: string) =>
    s.api.request('POST', '/telephony/twilio/inbound', { raw: new URLSearchParams({ To: s.number, From: '+14155550199', CallSid: sid }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const price = await withClient(s.api.databaseUrl, async (db) => Number((await db.query('SELECT monthly_price FROM phone_numbers WHERE id = $1', [s.numberId])).rows[0].monthly_price));
  t.ok(price > 0);

  t.same(await phoneNumbers.renewDue(), { renewed: [], lapsed: [] }, 'nothing is due within the first month');
  await monthEnded();
  const before = await balance();
  t.same(await phoneNumbers.renewDue(), { renewed: [s.numberId], lapsed: [] });
  t.equal(Math.round((before - (await balance())) * 1e6) / 1e6, price, 'the next month is charged');
  t.same(await phoneNumbers.renewDue(), { renewed: [], lapsed: [] }, 'once');

  await monthEnded();
  await s.api.request('POST', `/admin/users/${s.userId}/balance`, { token: ADMIN_TOKEN, body: { amount: -(await balance()), reason: 'empty it' } });
  t.same(await phoneNumbers.renewDue(), { renewed: [], lapsed: [s.numberId] });
  t.equal((await owned()).has_active_subscription, false);
  t.match(String((await webhook('CAlapsed')).body), /not connected to an assistant/, 'a lapsed number takes no calls');
  t.same(await phoneNumbers.renewDue(), { renewed: [], lapsed: [] }, 'still unpaid, nothing changes');

  const outbound = await s.api.assistant(s.token, { type: 'outbound', phone_number_id: s.numberId });
  const place = () => s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: outbound.id, phone_number: '+4915112345678' } });
  await s.api.credit(s.userId, 0.5);
  const refused = await place();
  t.same([refused.status, refused.body.errors], [422, { assistant_id: ["The assistant's phone number has lapsed: it is renewed once the balance covers its month."] }], 'nor places any');

  // Lapsed for 20 days by the time the owner can pay: the month paid then starts then.
  await withClient(s.api.databaseUrl, (db) => db.query(`UPDATE phone_numbers SET paid_until = now() - interval '20 days' WHERE id = $1`, [s.numberId]));
  await s.api.credit(s.userId, 5);
  t.same(await phoneNumbers.renewDue(), { renewed: [s.numberId], lapsed: [] }, 'renewed once the owner can pay');
  t.equal((await owned()).has_active_subscription, true);
  const daysPaid = await withClient(s.api.databaseUrl, async (db) => Number((await db.query(`SELECT extract(epoch FROM paid_until - now()) / 86400 AS days FROM phone_numbers WHERE id = $1`, [s.numberId])).rows[0].days));
  t.ok(daysPaid >= 27, `a whole month from the renewal (${daysPaid.toFixed(1)} days), not the rest of one that began while it took no calls`);
  t.match(String((await webhook('CArenewed')).body), /<Stream/, 'and it takes calls again');

  await withClient(s.api.databaseUrl, (db) => db.query(`UPDATE phone_numbers SET paid_until = now() - interval '31 days', has_active_subscription = false WHERE id = $1`, [s.numberId]));
  await phoneNumbers.renewDue();
  t.equal(await owned(), undefined, 'unpaid for 30 days after it lapsed, the number is given up');
  t.equal((await s.api.request('GET', `/user/assistant/${outbound.id}`, { token: s.token })).body.data.phone_number_id, null);
});

t.test('a repeated voice webhook gets the same call\'s stream while it is to connect, then a hang-up; one call either way', async (t) => {
  const s = await voiceSetup(t);
  const webhook = (fields: Record<string, string>) =>
    s.api.request('POST', '/telephony/twilio/inbound', { raw: new URLSearchParams(fields).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const fields = { To: s.number, From: '+14155550199', CallSid: 'CA0003' };
  const [first, again] = await Promise.all([webhook(fields), webhook(fields)]);
  t.equal(first.status, 200);
  t.equal(again.status, 200);
  const answers = [String(first.body), String(again.body)];
  const streaming = answers.filter((answer) => answer.includes('<Stream'));
  t.ok(streaming.length >= 1, 'the call is answered with its stream');
  const callOf = (answer: string) => /name="call_id" value="(\d+)"/.exec(answer)?.[1];
  for (const answer of answers) t.ok(callOf(answer) === callOf(streaming[0]!) || answer.includes('<Hangup/>'), 'a concurrent repeat is the same call\'s stream or a hang-up');
  const later = String((await webhook(fields)).body);
  t.equal(callOf(later), callOf(streaming[0]!), 'a later repeat before the stream connects streams the same call');
  t.equal((await s.api.request('GET', '/user/calls', { token: s.token })).body.total, 1, 'one call');

  const { SimulatedPhone } = await import('./helpers/phone.js');
  const url = /<Stream url="([^"]+)"/.exec(streaming[0]!)![1]!;
  const callId = /name="call_id" value="(\d+)"/.exec(streaming[0]!)![1]!;
  const token = /name="token" value="([^"]+)"/.exec(streaming[0]!)![1]!;
  const phone = await SimulatedPhone.dial(url, 'CA0003', { call_id: callId, token }, s.clock);
  await phone.until(() => phone.heard.speechFrames > 0, 2_000, 'the greeting over the stream of the answer given twice');
  t.match(String((await webhook(fields)).body), /<Response><Hangup\/><\/Response>/, 'once connected, a repeat is hung up');
  const invalid = await webhook({ ...fields, CallSid: 'CA\u0000' });
  t.same([invalid.status, invalid.body.errors], [422, { CallSid: ['The CallSid field is invalid.'] }]);
  phone.phone.hangUp();
  t.equal((await endedCall(s, Number(callId))).status, 'ended_by_customer');
  t.equal((await s.api.request('GET', '/user/calls', { token: s.token })).body.total, 1, 'still one call');
});

t.test('a start with a wrong, reused or missing token closes the socket and joins no call', async (t) => {
  const s = await voiceSetup(t);
  const { phone, callId, token } = await callIn(s);
  await phone.until(() => phone.heard.speechFrames > 0, 2_000, 'the greeting');
  const { MediaStreamPhone } = await import('../runtime/calls/carriers/loopback.js');
  const url = phone.phone.socket.url;
  for (const params of [{ call_id: String(callId), token }, { call_id: String(callId), token: 'wrong' }, { call_id: String(callId), token: '' }, { call_id: '999999', token: 'x' }]) {
    const intruder = new MediaStreamPhone(url, { callSid: 'CAX', customParameters: params });
    const closed = new Promise<number>((resolve) => intruder.on('close', resolve));
    await intruder.open();
    t.equal(await closed, 1008, `refused ${JSON.stringify(params)}`);
  }
  phone.phone.hangUp();
  t.equal((await endedCall(s, callId)).status, 'ended_by_customer');
});

t.test('ambient sound plays under the agent and while it is silent', async (t) => {
  const s = await voiceSetup(t, { ambient_sound: 'office', ambient_sound_volume: 0.5 });
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  const frames = phone.heard.frames;
  const speech = phone.heard.speechFrames;
  await phone.silence(1_000);
  t.equal(phone.heard.frames - frames, 50, 'a frame every 20 ms while the agent is silent');
  t.equal(phone.heard.speechFrames, speech, 'the bed is quieter than speech');
  phone.phone.hangUp();
  await endedCall(s, callId);
});

/**
 * A pipeline call with fillers whose model holds its answer to the caller's one turn until the
 * caller has heard something (the filler); the transcript once the caller hangs up.
 */
async function slowAnswerCall(t: Test, assistant: Record<string, unknown>, said: string, answer: string): Promise<{ s: VoiceSetup; transcript: string }> {
  const { startFakeOpenAi } = await import('./fakes/openai.js');
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, { fillers: true, ...assistant }, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } } } });
  let release!: () => void;
  fake.scriptChat({ text: answer, heldUntil: new Promise<void>((resolve) => (release = resolve)) });
  const { phone, callId } = await callIn(s, [said]);
  await phone.untilAgentDone();
  await phone.talk(800);
  const afterTurn = phone.heard.speechFrames;
  await phone.until(() => phone.heard.speechFrames > afterTurn + 5, 10_000, 'the filler while the model has not answered');
  release();
  const session = s.api.platform.runtime.services.voice.session(callId)!;
  await phone.until(() => session.transcript.length === 3 && session.agentState === 'listening', 30_000, 'the answer after the filler');
  phone.phone.hangUp();
  return { s, transcript: (await endedCall(s, callId)).transcript };
}

t.test('fillers: a short filler is spoken when the first token is slow; call metrics are exported', async (t) => {
  const { s, transcript } = await slowAnswerCall(t, { initial_message: 'Hi.' }, 'Tell me something.', 'Here is the answer.');
  t.match(transcript, /\nuser: Tell me something\.\nassistant: (One moment\.|Let me see\.|Sure, just a second\.) Here is the answer\.$/);
  const metrics = await s.api.request('GET', '//metrics');
  t.match(metrics.body, /active_calls\{mode="pipeline"\} 0/);
  t.match(metrics.body, /call_turns_total\{mode="pipeline"\} 1/);
  t.match(metrics.body, /voice_to_voice_added_seconds_count 1/);
  t.match(metrics.body, /provider_first_byte_seconds_count\{kind="llm",provider="openai"\} 1/);
  t.match(metrics.body, /open_sockets\{kind="telephony"\} 0/);
  const lateness = (le: string) => Number(new RegExp(`call_audio_frame_lateness_seconds_${le} (\\d+)`).exec(metrics.body)?.[1]);
  t.ok(lateness('count') > 50, 'the lateness of every scheduled frame is measured');
  t.equal(lateness('bucket\\{le="0.005"\\}'), lateness('count'), 'on a 5 ms ticker no frame leaves later than that');
});

t.test('fillers speak the language of the call; every language of the catalog has its own', async (t) => {
  const { FILLER_LANGUAGES } = await import('../runtime/voice/speaking/fillers.js');
  const { s, transcript } = await slowAnswerCall(t, { language_id: 2, voice_id: 6, initial_message: 'Hallo.' }, 'Erzähl mir etwas.', 'Hier ist die Antwort.');
  t.match(transcript, /\nuser: Erzähl mir etwas\.\nassistant: (Einen Moment\.|Mal sehen\.|Einen Augenblick, bitte\.) Hier ist die Antwort\.$/);
  const languages = (await s.api.request('GET', '/user/assistants/languages', { token: s.token })).body as Array<{ iso_2: string }>;
  t.same(languages.map((l) => l.iso_2).filter((code) => !FILLER_LANGUAGES.includes(code)), [], 'no language without fillers');
});

t.test('fillers answer the caller only: a slow re-engagement is not preceded by one', async (t) => {
  const { startFakeOpenAi } = await import('./fakes/openai.js');
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, { fillers: true, initial_message: 'Hi.', max_silence_duration: 2, reengagement_interval: 60 }, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } } } });
  let release!: () => void;
  fake.scriptChat({ text: 'Are you still there?', heldUntil: new Promise<void>((resolve) => (release = resolve)) });
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  const greeted = phone.heard.speechFrames;
  await phone.until(() => fake.requests.length === 1, 5_000, 'the re-engagement asked of the model');
  await phone.silence(2_000);
  t.equal(phone.heard.speechFrames, greeted, 'two seconds of the model thinking, and no filler');
  release();
  await phone.until(() => phone.heard.speechFrames > greeted + 10, 5_000, 'the re-engagement');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  t.equal((await endedCall(s, callId)).transcript, 'assistant: Hi.\nassistant: Are you still there?');
});

t.test("a null character in the model's answer: the call's transcript is saved with it replaced", async (t) => {
  const { startFakeOpenAi } = await import('./fakes/openai.js');
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, { initial_message: 'Hi.' }, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } } } });
  fake.scriptChat({ text: 'Odd\u0000answer.' });
  const { phone, callId } = await callIn(s, ['Say something odd.']);
  await phone.untilAgentDone();
  await phone.turn();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_customer');
  t.match(call.transcript, /\nuser: Say something odd\.\nassistant: Odd\uFFFDanswer\.$/);
});

t.test("knowledgebase_mode prompt: each caller turn's system prompt carries the passages that answer it", async (t) => {
  const s = await voiceSetup(t, { initial_message: 'Hi.' });
  const kb = (await s.api.request('POST', '/user/knowledgebases', { token: s.token, body: { name: 'Policies' } })).body.data.id;
  const form = new FormData();
  form.set('name', 'Hours');
  form.set('type', 'txt');
  form.set('file', new Blob(['Returns are accepted within 30 days with a receipt.\n\nOur stores open at 8 am.']), 'hours.txt');
  const doc = (await s.api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: s.token, raw: form })).body.data.id;
  await s.api.platform.runtime.settled();
  t.equal((await s.api.request('GET', `/user/knowledgebases/${kb}/documents/${doc}`, { token: s.token })).body.data.status, 'active', 'the document is ingested');
  await s.api.request('PUT', `/user/assistant/${s.assistantId}`, { token: s.token, body: { knowledgebase_id: kb, knowledgebase_mode: 'prompt' } });
  const { phone, callId } = await callIn(s, ['When do stores open?']);
  await phone.untilAgentDone();
  await phone.turn();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.match(call.transcript, /user: When do stores open\?\nassistant: Our stores open at 8 am\./);
});
