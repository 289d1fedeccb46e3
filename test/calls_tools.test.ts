import { once } from 'node:events';
import t from 'tap';
import { FRAME_SAMPLES, SAMPLE_RATE } from '../runtime/voice/audio.js';
import { createLoopbackCarrier } from '../runtime/calls/carriers/loopback.js';
import { filler } from '../runtime/voice/speaking/fillers.js';
import { startFakeCalcom } from './fakes/calcom.js';
import { startFakeOpenAi } from './fakes/openai.js';
import { startSite } from './helpers/site.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * Tools during a call: the built-in end_call, call_transfer (with business hours, and a carrier
 * that ends the stream before it answers the transfer), dtmf_input
 * (tones played into the call) and calendar_integration (Cal.com), keypad input from the caller,
 * and a mid-call custom tool.
 */

/** Goertzel power of one frequency in a frame. */
function power(frame: Int16Array, frequency: number): number {
  const k = 2 * Math.cos((2 * Math.PI * frequency) / SAMPLE_RATE);
  let s1 = 0;
  let s2 = 0;
  for (const sample of frame) {
    const s0 = sample / 32_768 + k * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return (s1 * s1 + s2 * s2 - k * s1 * s2) / frame.length;
}

t.test('end_call: the goodbye is played, then the call ends ended_by_assistant', async (t) => {
  const s = await voiceSetup(t, { tools: [{ type: 'end_call', description: 'When the caller is done' }] });
  const { phone, callId } = await callIn(s, ['Thanks, please end call now.']);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => phone.closed, 10_000, 'the end of the call');
  t.ok(phone.heard.speechFrames > 60, 'the goodbye was heard before the end');
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_assistant');
  t.match(call.transcript, /\nuser: Thanks, please end call now\.\nassistant: Thank you for calling\. Goodbye\.$/, 'the goodbye end_call asked for');
});

t.test('call_transfer: a carrier that ends the stream before it answers the transfer still completes the call', async (t) => {
  const loopback = createLoopbackCarrier(() => {});
  let streamEnds: () => Promise<void> = async () => {};
  // As Twilio does on a redirect: the media stream stops before the REST call returns.
  const carrier = { ...loopback, transfer: async (carrierCallId: string, number: string) => {
    await streamEnds();
    return loopback.transfer(carrierCallId, number);
  } };
  const s = await voiceSetup(t, { tools: [{ type: 'call_transfer', phone_number: '+14155550123', description: 'To a human' }] }, { runtime: { carrier } });
  const { phone, callId } = await callIn(s, ['Please transfer call to a human.']);
  streamEnds = async () => {
    const closed = once(phone.phone.socket, 'close');
    phone.phone.hangUp();
    await closed;
  };
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => phone.closed, 10_000, 'the end of the call');
  const call = await endedCall(s, callId);
  t.equal(call.status, 'completed', 'transferred, not ended by the customer');
  t.equal(loopback.transfers.length, 1);
});

t.test('call_transfer: redirected through the carrier in business hours, refused outside them', async (t) => {
  const carrier = createLoopbackCarrier(() => {});
  const s = await voiceSetup(t, { tools: [{ type: 'call_transfer', phone_number: '+14155550123', description: 'To a human' }] }, { runtime: { carrier } });
  const { phone, callId } = await callIn(s, ['Please transfer call to a human.']);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => phone.closed, 10_000, 'the end of the call');
  const call = await endedCall(s, callId);
  t.equal(call.status, 'completed', 'a transferred call is completed');
  t.equal(carrier.transfers.length, 1);
  t.equal(carrier.transfers[0]!.number, '+14155550123');
  t.match(carrier.transfers[0]!.carrierCallId, /^CA/, 'the carrier call of the inbound call');

  const tokyo = await voiceSetup(t, { tools: [{ type: 'call_transfer', phone_number: '+14155550123', timezone: 'Asia/Tokyo' }] }, { runtime: { carrier } });
  const late = await callIn(tokyo, ['Please transfer call.']);
  await late.phone.untilAgentDone();
  await late.phone.talk(800);
  await late.phone.until(() => late.phone.heard.speechFrames > 120, 5_000, 'the answer');
  await late.phone.untilAgentDone();
  late.phone.phone.hangUp();
  const stayed = await endedCall(tokyo, late.callId);
  t.equal(stayed.status, 'ended_by_customer');
  t.match(stayed.transcript, /outside business hours/);
  t.equal(carrier.transfers.length, 1, 'no transfer at 19:00 in Tokyo');
});

t.test('dtmf_input plays the tone pairs into the call; keys the caller presses reach the model', async (t) => {
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, { tools: [{ type: 'dtmf_input' }] }, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } } } });
  fake.scriptChat({ toolCalls: [{ name: 'send_dtmf', arguments: { digits: '1#' } }] }, { text: 'I pressed one and hash.' }, { text: 'You pressed four two.' });
  const { phone, callId } = await callIn(s, ['Press one and then hash.']);
  const tones: Int16Array[] = [];
  phone.phone.on('audio', (frame) => tones.push(frame));
  await phone.untilAgentDone();
  tones.length = 0;
  await phone.talk(800);
  await phone.until(() => tones.length > 20, 5_000, 'the tones');
  await phone.untilAgentDone();
  const one = tones.filter((f) => f.length === FRAME_SAMPLES && power(f, 697) > 0.01 && power(f, 1209) > 0.01).length;
  const hash = tones.filter((f) => f.length === FRAME_SAMPLES && power(f, 941) > 0.01 && power(f, 1477) > 0.01).length;
  t.ok(one >= 3, `tone 1 (697 + 1209 Hz) in ${one} frames`);
  t.ok(hash >= 3, `tone # (941 + 1477 Hz) in ${hash} frames`);

  phone.phone.dtmf('4');
  await phone.silence(200);
  phone.phone.dtmf('2');
  await phone.until(() => fake.requests.filter((r) => r.path.includes('chat')).length >= 3, 5_000, 'the keys reaching the model');
  await phone.untilAgentDone();
  const asked = fake.requests.filter((r) => r.path.includes('chat'))[2]!.body;
  t.equal(asked.messages.at(-1).content, '[The caller pressed the keys 42]');
  t.same(asked.tools.map((tool: { function: { name: string } }) => tool.function.name), ['send_dtmf']);
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.match(call.transcript, /user: Press one and then hash\.\nassistant: I pressed one and hash\.\nuser: \[The caller pressed the keys 42\]\nassistant: You pressed four two\.$/);
});

t.test('a mid-call tool and the calendar tools are called during the call', async (t) => {
  const site = await startSite(t);
  site.route('/orders', (req) => ({ type: 'application/json', body: JSON.stringify({ order: new URL(req.url!, 'http://x').searchParams.get('order_id'), status: 'shipped' }) }));
  const calcom = await startFakeCalcom(t, { apiKey: 'cal_live_key', username: 'ada', slots: { '2026-11-25': ['2026-11-25T09:00:00.000Z', '2026-11-25T10:00:00.000Z'] } });
  const fake = await startFakeOpenAi(t);
  const clock = { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } }, outboundAllowPrivate: true, calendarApiUrl: calcom.origin } };
  const s = await voiceSetup(t, { timezone: 'Europe/Berlin', tools: [{ type: 'calendar_integration', calendar_api_key: 'cal_live_key', calendar_event_slug: 'intro-call' }] }, clock);
  const tool = await s.api.request('POST', '/user/tools', {
    token: s.token,
    body: { name: 'check_order', description: 'Looks up an order', endpoint: `${site.origin}/orders`, method: 'GET', timeout: 5, schema: [{ name: 'order_id', type: 'string', description: 'The order id' }] },
  });
  await s.api.request('PUT', `/user/assistant/${s.assistantId}`, { token: s.token, body: { tool_ids: [tool.body.data.id] } });
  fake.scriptChat(
    { toolCalls: [{ name: 'check_order', arguments: { order_id: 'A-17' } }] },
    { text: 'Your order A-17 has shipped.' },
    { toolCalls: [{ name: 'check_availability', arguments: { date: '2026-11-25' } }] },
    { toolCalls: [{ name: 'book_appointment', arguments: { start: '2026-11-25T09:00:00Z', name: 'Ada', email: 'ada@example.com' } }] },
    { text: 'You are booked for nine.' },
  );
  const { phone, callId } = await callIn(s, ['Where is my order A-17?', 'Book me a call tomorrow morning.']);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => fake.requests.length >= 2, 5_000, 'the tool round');
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => fake.requests.length >= 5, 5_000, 'the calendar rounds');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.same(site.requests, ['/orders?order_id=A-17']);
  t.same(JSON.parse(fake.requests[1]!.body.messages.at(-1).content), { order: 'A-17', status: 'shipped' });
  t.same(calcom.requests.map((r) => `${r.method} ${r.path.split('?')[0]}`), ['GET /v2/me', 'GET /v2/slots', 'POST /v2/bookings']);
  t.match(calcom.requests[1]!.path, /eventTypeSlug=intro-call&username=ada&start=2026-11-25&end=2026-11-26&timeZone=Europe%2FBerlin/, "the assistant's time zone when the model names none");
  t.same(calcom.requests[2]!.body, { start: '2026-11-25T09:00:00.000Z', eventTypeSlug: 'intro-call', username: 'ada', attendee: { name: 'Ada', email: 'ada@example.com', timeZone: 'Europe/Berlin' } });
  t.same(JSON.parse(fake.requests[3]!.body.messages.at(-1).content), { ok: true, slots: ['2026-11-25T09:00:00.000Z', '2026-11-25T10:00:00.000Z'] });
  t.match(call.transcript, /assistant: Your order A-17 has shipped\.\nuser: Book me a call tomorrow morning\.\nassistant: You are booked for nine\.$/);
});

t.test('after the caller hangs up, no further tool of the turn runs', async (t) => {
  const site = await startSite(t);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let arrived!: () => void;
  const firstCall = new Promise<void>((resolve) => (arrived = resolve));
  site.route('/orders', () => (arrived(), { type: 'application/json', body: '{"status":"shipped"}', heldUntil: held }));
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, {}, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } }, outboundAllowPrivate: true } });
  const tool = await s.api.request('POST', '/user/tools', {
    token: s.token,
    body: { name: 'check_order', description: 'Looks up an order', endpoint: `${site.origin}/orders`, method: 'GET', timeout: 30, schema: [{ name: 'order_id', type: 'string', description: 'The order id' }] },
  });
  await s.api.request('PUT', `/user/assistant/${s.assistantId}`, { token: s.token, body: { tool_ids: [tool.body.data.id] } });
  fake.scriptChat({ toolCalls: [{ name: 'check_order', arguments: { order_id: 'A-1' } }, { name: 'check_order', arguments: { order_id: 'A-2' } }] }, { text: 'Both shipped.' });
  const { phone, callId } = await callIn(s, ['Where are orders A-1 and A-2?']);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => site.requests.length > 0, 5_000, 'the first tool call');
  await firstCall;
  phone.phone.hangUp();
  await s.api.platform.runtime.services.voice.whenEnded(callId);
  release();
  t.match(await endedCall(s, callId), { status: 'ended_by_customer' });
  // The first request was under way when the caller left; the turn stops there.
  await new Promise((resolve) => setImmediate(resolve));
  t.same(site.requests, ['/orders?order_id=A-1'], 'the second lookup never ran');
});

t.test('fillers: a function that takes its time gets one filler while it runs; one the model announced gets none', async (t) => {
  const site = await startSite(t);
  let release!: () => void;
  site.route('/orders', () => ({ type: 'application/json', body: '{"status":"shipped"}', heldUntil: new Promise<void>((resolve) => (release = resolve)) }));
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, { fillers: true, initial_message: 'Hi.' }, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } }, outboundAllowPrivate: true } });
  const tool = await s.api.request('POST', '/user/tools', {
    token: s.token,
    body: { name: 'check_order', description: 'Looks up an order', endpoint: `${site.origin}/orders`, method: 'GET', timeout: 30, schema: [{ name: 'order_id', type: 'string', description: 'The order id' }] },
  });
  await s.api.request('PUT', `/user/assistant/${s.assistantId}`, { token: s.token, body: { tool_ids: [tool.body.data.id] } });
  fake.scriptChat(
    { toolCalls: [{ name: 'check_order', arguments: { order_id: 'A-1' } }] },
    { text: 'Order A-1 has shipped.' },
    { text: 'Let me look.', toolCalls: [{ name: 'check_order', arguments: { order_id: 'A-2' } }] },
    { text: 'Order A-2 has shipped too.' },
  );
  const { phone, callId } = await callIn(s, ['Where is order A-1?', 'And order A-2?']);
  const session = s.api.platform.runtime.services.voice.session(callId)!;
  await phone.untilAgentDone();
  for (const order of ['A-1', 'A-2']) {
    await phone.talk(800);
    await phone.until(() => site.requests.length > (order === 'A-1' ? 0 : 1), 5_000, `the lookup of ${order}`);
    // Two seconds with the lookup held: the filler comes (or not) in that time.
    const before = phone.heard.speechFrames;
    await phone.silence(2_000);
    if (order === 'A-1') t.ok(phone.heard.speechFrames > before + 5, 'a filler while the silent lookup runs');
    release();
    await phone.until(() => session.agentState === 'listening' && session.transcript.at(-1)?.text.includes('shipped') === true, 10_000, 'the answer');
    await phone.untilAgentDone();
  }
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  // Usually the lookup's filler; the model's own wait's, should its call take 800 ms of the call's time to arrive.
  const anyFiller = [0, 1, 2].flatMap((seed) => [filler('en', 'tool', seed), filler('en', 'wait', seed)]).map((phrase) => phrase!.replace(/[.?]/g, '\\$&')).join('|');
  t.match(call.transcript, new RegExp(`\\nuser: Where is order A-1\\?\\nassistant: (${anyFiller}) Order A-1 has shipped\\.\\nuser: And order A-2\\?\\nassistant: Let me look\\. Order A-2 has shipped too\\.$`));
});

t.test('the caller speaks while tools run: the next turn gets every call answered, in order, and the call goes on', async (t) => {
  const site = await startSite(t);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  site.route('/orders', () => ({ type: 'application/json', body: '{"status":"shipped"}', heldUntil: held }));
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, { initial_message: 'Hi.' }, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } }, outboundAllowPrivate: true } });
  const tool = await s.api.request('POST', '/user/tools', {
    token: s.token,
    body: { name: 'check_order', description: 'Looks up an order', endpoint: `${site.origin}/orders`, method: 'GET', timeout: 30, schema: [{ name: 'order_id', type: 'string', description: 'The order id' }] },
  });
  await s.api.request('PUT', `/user/assistant/${s.assistantId}`, { token: s.token, body: { tool_ids: [tool.body.data.id] } });
  fake.scriptChat({ text: 'Let me check.', toolCalls: [{ name: 'check_order', arguments: { order_id: 'A-1' } }, { name: 'check_order', arguments: { order_id: 'A-2' } }] }, { text: 'Noted, your address is changed.' });
  const { phone, callId } = await callIn(s, ['Where are orders A-1 and A-2?', 'Also, my address changed.']);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => site.requests.length > 0, 5_000, 'the first lookup');
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => fake.requests.filter((r) => r.path.includes('chat')).length >= 2, 10_000, 'the next turn');
  release();
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_customer', 'the call went on to its end');
  const messages = fake.requests.filter((r) => r.path.includes('chat'))[1]!.body.messages as Array<{ role: string; content: string | null; tool_calls?: Array<{ id: string }>; tool_call_id?: string }>;
  const asked = messages.findIndex((m) => m.tool_calls);
  t.ok(asked > 0, 'the tool round is in the history');
  t.same(messages.slice(asked + 1, asked + 3).map((m) => [m.role, m.tool_call_id]), messages[asked]!.tool_calls!.map((c) => ['tool', c.id]), 'each call answered right after it');
  t.match(messages[asked + 2]!.content, /Not run/, 'the one cut off says so');
  t.equal(messages.filter((m) => m.role === 'assistant' && m.content === 'Let me check.').length, 1, 'what was said before the tools is there once');
  t.match(messages.at(-1), { role: 'user', content: 'Also, my address changed.' });
});
