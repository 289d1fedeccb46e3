/**
 * Junk on the WebSockets never breaks the server or the call: the Twilio media stream (before a
 * stream is claimed and during a live call), the browser web call and the chat socket are sent
 * frames of every wrong shape (JSON that is not an object, fields of the wrong type, bad base64,
 * odd-length and empty audio, oversized text); the server keeps answering, live calls carry on
 * (the caller is still heard and answered) and end normally; the chat socket answers each with an
 * error frame and closes only for a frame over its size limit.
 */
import t from 'tap';
import WebSocket from 'ws';
import { pingPong } from '../runtime/calls/carriers/loopback.js';
import { SimulatedPhone } from './helpers/phone.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

const junkText = [
  'null', '1', '"x"', '[]', 'true', '{}', '{"__proto__":{"polluted":1}}',
  '{"event":null}', '{"event":{}}', '{"event":"media"}', '{"event":"media","media":null}', '{"event":"media","media":"x"}',
  '{"event":"media","media":{"payload":5}}', '{"event":"media","media":{"payload":["a"]}}', '{"event":"media","media":{"payload":"!!not base64!!"}}',
  '{"event":"media","media":{"payload":"AAAA","track":5}}', '{"event":"media","media":{"payload":""}}',
  '{"event":"mark"}', '{"event":"mark","mark":null}', '{"event":"mark","mark":{"name":{}}}', '{"event":"mark","mark":{"name":"never-sent"}}',
  '{"event":"dtmf","dtmf":null}', '{"event":"dtmf","dtmf":{"digit":5}}', '{"event":"dtmf","dtmf":{"digit":"xx"}}', '{"event":"dtmf","dtmf":{"digit":"\\u0000"}}',
  '{"event":"start"}', '{"event":"start","start":null}', '{"event":"start","start":{"customParameters":"x"}}',
  '{"type":null}', '{"type":{}}', '{"type":"mark"}', '{"type":"mark","name":5}', '{"type":"dtmf","digit":{}}', '{"type":"dtmf","digit":"\\u0000"}',
  '{"type":"message"}', '{"type":"message","text":null}', '{"type":"message","text":{}}', '{"type":"message","text":["hi"]}',
];
const junkBinary = [Buffer.alloc(0), Buffer.from([1]), Buffer.from([1, 2, 3]), Buffer.alloc(4001, 7)];

/** Longer than a chat frame may be (the socket is closed for one). */
const oversized = 'x'.repeat(60_000);

function sendAll(socket: WebSocket, options: { oversized: boolean }): void {
  for (const frame of junkText) socket.send(frame);
  if (options.oversized) socket.send(oversized);
  for (const frame of junkBinary) socket.send(frame);
}

t.test('the media stream before and during a call', async (t) => {
  const s = await voiceSetup(t);
  const unclaimed = new WebSocket(`${s.api.origin.replace('http', 'ws')}/ws/telephony/twilio`);
  await new Promise((resolve) => unclaimed.once('open', resolve));
  const closed = new Promise<number>((resolve) => unclaimed.once('close', resolve));
  sendAll(unclaimed, { oversized: true });
  unclaimed.send(JSON.stringify({ event: 'start', start: { streamSid: 'MZ1', customParameters: { call_id: '1', token: 'wrong' } } }));
  t.equal(await closed, 1008, 'a stream with a wrong token is refused after the junk, which was ignored');

  const { callId, phone } = await callIn(s, ['I would like to know the opening hours.']);
  await phone.untilAgentDone();
  sendAll(phone.phone.socket, { oversized: true });
  await phone.phone.sync();
  t.notOk(phone.closed, 'the call survives the junk');
  await phone.turn();
  t.pass('the caller is still heard and answered');
  phone.phone.hangUp();
  t.match(await endedCall(s, callId), { status: 'ended_by_customer' });
  t.equal((await s.api.request('GET', '//health')).status, 200);
});

t.test('the web call socket', async (t) => {
  const s = await voiceSetup(t, { type: 'outbound', phone_number_id: null });
  const created = await s.api.request('POST', '/web-calls', { body: { assistant_id: s.assistantUuid } });
  s.scripts.set(created.body.call_id, ['What are your opening hours?']);
  const phone = await SimulatedPhone.webCall(created.body.websocket_url, s.clock);
  await phone.untilAgentDone();
  sendAll(phone.phone.socket, { oversized: true });
  await phone.phone.sync();
  t.notOk(phone.closed, 'the call survives the junk');
  await phone.turn();
  phone.phone.hangUp();
  t.match(await endedCall(s, created.body.call_id), { status: 'ended_by_customer' });
  t.equal((await s.api.request('GET', '//health')).status, 200);
});

t.test('the chat socket', async (t) => {
  const s = await voiceSetup(t);
  const conversation = (await s.api.request('POST', '/conversations', { token: s.token, body: { assistant_id: s.assistantUuid, type: 'test' } })).body.conversation_id as string;
  const socket = new WebSocket(`${s.api.origin.replace('http', 'ws')}/ws/conversations/${conversation}`);
  const frames: Array<{ type: string }> = [];
  socket.on('message', (data) => frames.push(JSON.parse(data.toString())));
  await new Promise((resolve) => socket.once('open', resolve));
  // The first answer says the conversation was found: until then only 8 frames may wait (the
  // conversation socket test sends more).
  socket.send('{');
  await new Promise((resolve) => socket.once('message', resolve));
  sendAll(socket, { oversized: false });
  socket.send(JSON.stringify({ type: 'message', text: 'nul \u0000 inside' }));
  const expected = 1 + junkText.length + junkBinary.length + 1;
  await new Promise<void>((resolve) => {
    const check = () => frames.filter((f) => f.type === 'error').length >= expected && (socket.off('message', check), resolve());
    socket.on('message', check);
    check();
  });
  await pingPong(socket);
  t.equal(socket.readyState, WebSocket.OPEN, 'the socket stays open');
  const errors = frames.filter((f) => f.type === 'error');
  t.equal(errors.length, expected, 'each junk frame is answered with an error frame');
  t.match(errors.at(-1), { error: 'The text must not contain null characters.' });
  const closed = new Promise<number>((resolve) => socket.once('close', resolve));
  socket.send(oversized);
  const code = await closed;
  t.ok(code === 1009 || code === 1006, `an oversized frame closes the socket (${code})`);
  t.equal((await s.api.request('GET', '//health')).status, 200);
});
