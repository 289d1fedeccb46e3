import type { Test } from 'tap';
import WebSocket from 'ws';

/** Resolves once `socket` is open (rejects if it fails to connect); it is closed when `t` ends. */
export async function opened(t: Test, socket: WebSocket): Promise<WebSocket> {
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  t.teardown(() => socket.close());
  return socket;
}

/**
 * Closes `socket` and resolves once it is closed. The server (uWS) runs its close handler as it
 * answers the close frame, so by then it has let the socket go.
 */
export async function closed(socket: WebSocket): Promise<void> {
  if (socket.readyState === WebSocket.CLOSED) return;
  const done = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.close();
  await done;
}

/**
 * Resolves once the conversation socket has subscribed to its conversation's events: a frame sent
 * now is handled after the subscription, so its answer (an error for a frame that is not JSON)
 * comes back after it.
 */
export async function subscribed(socket: WebSocket): Promise<void> {
  const answered = new Promise<void>((resolve) => {
    const onFrame = (data: WebSocket.RawData) => {
      if (JSON.parse(data.toString()).type !== 'error') return;
      socket.off('message', onFrame);
      resolve();
    };
    socket.on('message', onFrame);
  });
  socket.send('not json');
  await answered;
}

/** Resolves once `condition` holds, looked at as each frame arrives on `socket`. */
export async function whenFrames(socket: WebSocket, condition: () => boolean): Promise<void> {
  if (condition()) return;
  await new Promise<void>((resolve) => {
    const onFrame = () => {
      if (!condition()) return;
      socket.off('message', onFrame);
      resolve();
    };
    socket.on('message', onFrame);
  });
}
