/**
 * A WebSocket handler that throws ends only its own connection: the guard logs the failure and
 * closes that socket with 1011, while the process and the other connections carry on.
 */
import { Writable } from 'node:stream';
import t from 'tap';
import uWS from 'uWebSockets.js';
import WebSocket from 'ws';
import { guarded } from '../api/sockets/guard.js';
import { createLogger } from '../runtime/logger.js';

t.test('a throwing handler closes its socket with 1011 and is logged', async (t) => {
  const lines: Array<{ msg: string; socket?: string; stage?: string }> = [];
  const logger = createLogger('info', new Writable({ write: (chunk, _encoding, done) => (lines.push(JSON.parse(String(chunk))), done()) }));
  const app = uWS.App();
  app.ws<Record<string, never>>(
    '/ws',
    guarded(logger, 'test', {
      message(ws, raw) {
        const text = Buffer.from(raw).toString();
        if (text === 'boom') throw new Error('handler bug');
        ws.send(`echo ${text}`);
      },
    }),
  );
  const listening = await new Promise<uWS.us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(socket) : reject(new Error('listen failed')))));
  const port = uWS.us_socket_local_port(listening as unknown as uWS.us_socket);
  t.teardown(() => uWS.us_listen_socket_close(listening));

  const connect = async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`);
    await new Promise((resolve) => socket.once('open', resolve));
    return socket;
  };
  const faulty = await connect();
  const healthy = await connect();
  const closed = new Promise<number>((resolve) => faulty.once('close', resolve));
  faulty.send('boom');
  t.equal(await closed, 1011, 'the faulty connection is ended as an internal error');
  const echo = new Promise<string>((resolve) => healthy.once('message', (data) => resolve(String(data))));
  healthy.send('still there?');
  t.equal(await echo, 'echo still there?', 'another connection is unaffected');
  t.match(lines, [{ msg: 'socket handler failed', socket: 'test', stage: 'message' }]);
  healthy.close();
});
