import type { Test } from 'tap';
import type WebSocket from 'ws';

/** Resolves once `socket` is open (rejects if it fails to connect); it is closed when `t` ends. */
export async function opened(t: Test, socket: WebSocket): Promise<WebSocket> {
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  t.teardown(() => socket.close());
  return socket;
}
