import type uWS from 'uWebSockets.js';
import type { ConversationEngine, ConversationEvent } from '../../runtime/conversations/engine.js';
import type { ConversationService } from '../../runtime/conversations/service.js';
import { PlatformError, ValidationError } from '../../runtime/errors.js';
import type { Logger } from '../../runtime/logger.js';
import type { RateLimiter } from '../../runtime/rateLimit.js';
import { clientAddress } from '../http/params.js';
import { guarded } from './guard.js';

/**
 * The realtime widget socket, `GET /ws/conversations/{uuid}`. Clients send
 * `{type: "message", text}`; every socket on the conversation receives the reply as it streams:
 * `{type: "delta", text}`, `{type: "function_call", name, arguments, result}`, and
 * `{type: "message", role, content, function_calls}` for each stored message; failures and bad
 * frames get `{type: "error", error}` and the socket stays open.
 */

interface SocketData {
  readonly conversationId: string;
  readonly ip: string;
  unsubscribe?: () => void;
  closed: boolean;
}

const MAX_FRAME = 16 * 1024;

export function conversationSocket(
  app: uWS.TemplatedApp,
  deps: {
    conversations: ConversationService;
    engine: ConversationEngine;
    /** The REST operations' limiters: a client's budget is the same over REST and sockets. */
    limits: { readonly perIp: RateLimiter; readonly perConversation: RateLimiter };
    logger: Logger;
    onCount?: (delta: number) => void;
    /** Proxies whose X-Forwarded-For is believed (`TRUST_PROXY`). */
    trustProxy: number;
  },
): void {
  app.ws<SocketData>('/ws/conversations/:id', guarded(deps.logger, 'widget', {
    maxPayloadLength: MAX_FRAME,
    idleTimeout: 120,
    sendPingsAutomatically: true,
    upgrade(res, req, context) {
      const conversationId = req.getParameter(0) ?? '';
      const key = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      const ip = clientAddress(Buffer.from(res.getRemoteAddressAsText()).toString(), req.getHeader('x-forwarded-for') || undefined, deps.trustProxy);
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
      });
      // An upgrade costs database reads: it takes from the caller's budget like a REST call.
      const verdict = deps.limits.perIp.take(`ip:${ip}`);
      if (!verdict.ok) {
        res.writeStatus('429 Too Many Requests').writeHeader('Retry-After', String(verdict.retryAfterSeconds)).writeHeader('Content-Type', 'application/json');
        res.end(JSON.stringify({ status: false, error: 'Too many requests. Please try again later.' }));
        return;
      }
      deps.conversations.find(conversationId).then(
        () => {
          if (aborted) return;
          res.cork(() => res.upgrade<SocketData>({ conversationId, ip, closed: false }, key, protocol, extensions, context));
        },
        (error: unknown) => {
          if (aborted) return;
          const status = error instanceof PlatformError ? error.statusCode : 500;
          const message = error instanceof PlatformError ? error.message : 'Server error.';
          res.cork(() => {
            res.writeStatus(status === 404 ? '404 Not Found' : '500 Internal Server Error');
            res.writeHeader('Content-Type', 'application/json');
            res.end(JSON.stringify({ status: false, error: message }));
          });
        },
      );
    },
    open(ws) {
      const data = ws.getUserData();
      deps.onCount?.(1);
      data.unsubscribe = deps.engine.subscribe(data.conversationId, (event: ConversationEvent) => {
        if (!data.closed) ws.send(JSON.stringify(event));
      });
    },
    message(ws, raw, isBinary) {
      const data = ws.getUserData();
      const fail = (error: string) => {
        if (!data.closed) ws.send(JSON.stringify({ type: 'error', error }));
      };
      if (isBinary) return fail('Frames must be JSON text.');
      let frame: unknown;
      try {
        frame = JSON.parse(Buffer.from(raw).toString('utf8'));
      } catch {
        return fail('The frame is not valid JSON.');
      }
      const { type, text } = (frame ?? {}) as { type?: unknown; text?: unknown };
      if (type !== 'message') return fail('Unknown frame type; send {"type": "message", "text": "..."}.');
      if (typeof text !== 'string' || text.trim() === '' || text.length > 2000) return fail('The text must be 1 to 2000 characters.');
      if (text.includes('\u0000')) return fail('The text must not contain null characters.');
      for (const [limiter, key] of [[deps.limits.perIp, `ip:${data.ip}`], [deps.limits.perConversation, `conversation:${data.conversationId}`]] as const) {
        const verdict = limiter.take(key);
        if (!verdict.ok) return fail(`Too many messages. Try again in ${verdict.retryAfterSeconds} seconds.`);
      }
      deps.conversations.send(data.conversationId, text).catch((error: unknown) => {
        if (error instanceof PlatformError || error instanceof ValidationError) fail(error.message);
        else {
          deps.logger.error({ err: error, conversationId: data.conversationId }, 'socket message failed');
          fail('Server error.');
        }
      });
    },
    close(ws) {
      const data = ws.getUserData();
      data.closed = true;
      data.unsubscribe?.();
      deps.onCount?.(-1);
    },
  }));
}
