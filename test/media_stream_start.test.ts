/**
 * A media-stream connection that never sends `start` is closed (1008) after the start timeout,
 * although WebSocket pings would keep it open forever; one refused at `start` closes at once.
 */
import t from 'tap';
import uWS from 'uWebSockets.js';
import WebSocket from 'ws';
import { mediaSocket } from '../api/sockets/media.js';
import { twilioFormat } from '../runtime/voice/serializers/twilio.js';
import type { VoiceService } from '../runtime/calls/live.js';
import { createLogger } from '../runtime/logger.js';

const app = uWS.App();
// No stream token is valid here: this test is about connections that never join a call.
const voice = { claimHere: () => undefined, claim: async () => undefined } as unknown as VoiceService;
mediaSocket(app, twilioFormat, { voice, logger: createLogger('silent'), startTimeoutMs: 100 });
const listening = await new Promise<uWS.us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(socket) : reject(new Error('listen failed')))));
const url = `ws://127.0.0.1:${uWS.us_socket_local_port(listening as unknown as uWS.us_socket)}/ws/telephony/twilio`;
t.teardown(() => uWS.us_listen_socket_close(listening));

// Timed from before the connection is asked for: the server's timer starts when it accepts the
// socket, which may be before the client sees it open.
const connect = async () => {
  const asked = performance.now();
  const socket = new WebSocket(url);
  const closed = new Promise<{ code: number; after: number }>((resolve) => {
    socket.once('close', (code) => resolve({ code, after: performance.now() - asked }));
  });
  await new Promise((resolve) => socket.once('open', resolve));
  return { socket, closed };
};

t.test('silent connections are closed after the start timeout', async (t) => {
  const { socket, closed } = await connect();
  socket.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
  const { code, after } = await closed;
  t.equal(code, 1008);
  t.ok(after >= 90, `closed after ${Math.round(after)} ms`);
});

t.test('a refused start closes at once', async (t) => {
  const { socket, closed } = await connect();
  socket.send(JSON.stringify({ event: 'start', start: { streamSid: 'MZ1', customParameters: { call_id: '1', token: 'x' } } }));
  t.equal((await closed).code, 1008);
});
