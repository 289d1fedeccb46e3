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
  /** Ended in open() as one too many: never counted. */
  refused?: boolean;
}

const MAX_FRAME = 16 * 1024;
/** Sockets open on one conversation in this process: a visitor's tabs, not thousands each sent every event. */
export const MAX_SOCKETS_PER_CONVERSATION = 16;
const TOO_MANY_SOCKETS = 'Too many connections to this conversation. Close one and try again.';

/** Each event once as JSON, however many sockets it goes to. */
const serialized = new WeakMap<ConversationEvent, string>();
function frameOf(event: ConversationEvent): string {
  let text = serialized.get(event);
  if (text === undefined) {
    text = JSON.stringify(event);
    serialized.set(event, text);
  }
  return text;
}

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
  const openSockets = new Map<string, number>();
  const refuse = (res: uWS.HttpResponse, status: string, error: string, headers: Record<string, string> = {}) => {
    res.writeStatus(status);
    for (const [name, value] of Object.entries(headers)) res.writeHeader(name, value);
    res.writeHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ status: false, error }));
  };
  app.ws<SocketData>('/ws/conversations/:id', guarded(deps.logger, 'widget', {
    maxPayloadLength: MAX_FRAME,
    idleTimeout: 120,
    sendPingsAutomatically: true,
    upgrade(res, req, context) {
      // Ids are stored, and events keyed, in lower case; the cap counts them so too.
      const conversationId = (req.getParameter(0) ?? '').toLowerCase();
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
      if (!verdict.ok) return refuse(res, '429 Too Many Requests', 'Too many requests. Please try again later.', { 'Retry-After': String(verdict.retryAfterSeconds) });
      if ((openSockets.get(conversationId) ?? 0) >= MAX_SOCKETS_PER_CONVERSATION) return refuse(res, '429 Too Many Requests', TOO_MANY_SOCKETS);
      deps.conversations.find(conversationId).then(
        () => {
          if (aborted) return;
          res.cork(() => res.upgrade<SocketData>({ conversationId, ip, closed: false }, key, protocol, extensions, context));
        },
        (error: unknown) => {
          if (aborted) return;
          const status = error instanceof PlatformError ? error.statusCode : 500;
          const message = error instanceof PlatformError ? error.message : 'Server error.';
          res.cork(() => refuse(res, status === 404 ? '404 Not Found' : '500 Internal Server Error', message));
        },
      );
    },
    open(ws) {
      const data = ws.getUserData();
      const count = openSockets.get(data.conversationId) ?? 0;
      // Upgrades that passed the check together while the conversation was looked up: the last ones
      // leave, uncounted (uWS runs close() inside end(), where this socket can no longer be read).
      if (count >= MAX_SOCKETS_PER_CONVERSATION) {
        data.refused = true;
        return void ws.end(1013, TOO_MANY_SOCKETS);
      }
      openSockets.set(data.conversationId, count + 1);
      deps.onCount?.(1);
      data.unsubscribe = deps.engine.subscribe(data.conversationId, (event: ConversationEvent) => {
        if (!data.closed) ws.send(frameOf(event));
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
      let data: SocketData;
      try {
        data = ws.getUserData();
      } catch {
        return;
      }
      if (data.refused) return;
      data.closed = true;
      data.unsubscribe?.();
      deps.onCount?.(-1);
      const left = (openSockets.get(data.conversationId) ?? 1) - 1;
      if (left > 0) openSockets.set(data.conversationId, left);
      else openSockets.delete(data.conversationId);
    },
  }));
}
