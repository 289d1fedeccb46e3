import type uWS from 'uWebSockets.js';
import type { Logger } from '../../runtime/logger.js';

type Stage = 'open' | 'message' | 'drain' | 'close';

/**
 * A socket's handlers with their failures contained: an exception in one connection's handler is
 * logged and ends that connection (1011, internal error) instead of reaching the process, where it
 * would end every call the server carries.
 */
export function guarded<T>(logger: Logger, kind: string, behavior: uWS.WebSocketBehavior<T>): uWS.WebSocketBehavior<T> {
  const contained = { ...behavior } as Record<Stage, unknown>;
  for (const stage of ['open', 'message', 'drain', 'close'] as const) {
    const handler = behavior[stage] as ((ws: uWS.WebSocket<T>, a?: unknown, b?: unknown) => void) | undefined;
    if (!handler) continue;
    // Fixed parameters (no rest array): `message` runs for every 20 ms media frame.
    contained[stage] = (ws: uWS.WebSocket<T>, a?: unknown, b?: unknown) => {
      try {
        handler(ws, a, b);
      } catch (error) {
        logger.error({ err: error, socket: kind, stage }, 'socket handler failed');
        if (stage === 'close') return;
        try {
          ws.end(1011, 'internal error');
        } catch {
          // Already closed.
        }
      }
    };
  }
  return contained as uWS.WebSocketBehavior<T>;
}
