import type uWS from 'uWebSockets.js';
import type { ConversationEngine } from '../../runtime/conversations/engine.js';
import { visitorEvent, type ConversationEvent } from '../../runtime/conversations/fanout.js';
import type { ConversationService } from '../../runtime/conversations/service.js';
import { PlatformError, ValidationError } from '../../runtime/errors.js';
import type { Logger } from '../../runtime/logger.js';
import type { RateLimiter } from '../../runtime/rateLimit.js';
import { clientAddress } from '../http/params.js';
import { guarded } from './guard.js';

/**
 * The realtime widget socket, `GET /ws/conversations/{uuid}[?after=<message id>]`. Clients send
 * `{type: "message", text, client_id?}`; every socket on the conversation receives the reply as it
 * streams: `{type: "typing", active: true}` when a turn starts answering, `{type: "delta", text}`,
 * `{type: "message", id, role, content, function_calls: []}` for each stored message (`id` grows
 * with each message of the conversation), and `{type: "typing", active: false}` when the turn ends
 * (with its reply or without). Typing and deltas come only from the process running the turn.
 * Failures and bad frames get `{type: "error", error}` (with the message's `client_id`, when it
 * had a valid one: 1-64 letters, digits, `_` or `-`) and the socket stays open.
 *
 * With `after` (a message id, 0 for the whole conversation), the socket is first sent the messages
 * stored after that one (the latest 200), then `{type: "synced", last_id}`: a client that
 * reconnects or reloads asks from the last id it has and misses nothing; live events that come
 * meanwhile follow the catch-up, without repeating it. Without `after` nothing is replayed.
 * The socket is public, a visitor's view (`visitorEvent`): no function calls, and a reply that
 * fails says the registry's generic message (the reason is logged). Too many upgrades (per client
 * address, or sockets on the conversation) are refused with 429; a conversation that does not exist
 * is closed at once with 4404 (1011 when it could not be looked up), and one that sends more than 8
 * frames before its conversation is found with 1008.
 *
 * The socket is upgraded at once and the conversation looked up meanwhile: an upgrade made later,
 * from the lookup's callback, has to be corked, and this uWS build's cork reads the response's
 * state again after the upgrade has moved the socket, so now and then (about one upgrade in
 * 10,000) it closed the new WebSocket at once (uNetworking/uWebSockets#1929).
 */

/** Close codes of a socket whose conversation cannot be had, or that sent too much too soon. */
const NOT_FOUND = 4404;
const INTERNAL_ERROR = 1011;
const POLICY_VIOLATION = 1008;
/** Frames a socket may send before its conversation is found: a client waits for none, and sends one or two. */
const MAX_WAITING_FRAMES = 8;
/** Messages a catch-up (`after`) sends at most: the latest of those missed. */
export const CATCH_UP_LIMIT = 200;
const CLIENT_ID = /^[\w-]{1,64}$/;

interface SocketData {
  readonly conversationId: string;
  readonly ip: string;
  /** The message id the client has up to (`?after=`): the socket is sent what was stored after it. */
  readonly after: number | undefined;
  /** The conversation's lookup, started at the upgrade, until it is found; messages wait for it. */
  found: Promise<void> | undefined;
  /** Frames received while the lookup runs. */
  waiting: number;
  /**
   * Stops the conversation's events to this socket. Not named `unsubscribe`: the user data is read
   * through the WebSocket object, whose own `unsubscribe` (uWS pub/sub) would answer until this is set.
   */
  stopEvents?: () => void;
  closed: boolean;
  /** Counted among the conversation's open sockets (until released). */
  counted?: boolean;
}

const MAX_FRAME = 16 * 1024;

/** `?after=` as a message id (digits only, 0 upward); anything else asks for no catch-up. */
function catchUpFrom(raw: string | undefined): number | undefined {
  if (!raw || !/^\d{1,15}$/.test(raw)) return undefined;
  return Number(raw);
}
/** Sockets open on one conversation in this process: a visitor's tabs, not thousands each sent every event. */
export const MAX_SOCKETS_PER_CONVERSATION = 16;
const TOO_MANY_SOCKETS = 'Too many connections to this conversation. Close one and try again.';

/** Each event once as a visitor's JSON frame (empty: not shown), however many sockets it goes to. */
const serialized = new WeakMap<ConversationEvent, string>();
function frameOf(event: ConversationEvent): string | undefined {
  let text = serialized.get(event);
  if (text === undefined) {
    const shown = visitorEvent(event);
    text = shown ? JSON.stringify(shown) : '';
    serialized.set(event, text);
  }
  return text || undefined;
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
  /** Marks a socket closed and takes it off the counts, once. */
  const release = (data: SocketData): void => {
    data.closed = true;
    data.stopEvents?.();
    data.stopEvents = undefined;
    if (!data.counted) return;
    data.counted = false;
    deps.onCount?.(-1);
    const left = (openSockets.get(data.conversationId) ?? 1) - 1;
    if (left > 0) openSockets.set(data.conversationId, left);
    else openSockets.delete(data.conversationId);
  };
  /**
   * Work of a socket in a promise's callback, outside the handlers `guarded` contains: a failure is
   * logged and ends that socket (1011), and never becomes an unhandled rejection of the process.
   */
  const later = (ws: uWS.WebSocket<SocketData>, data: SocketData, work: () => void): void => {
    try {
      work();
    } catch (error) {
      deps.logger.error({ err: error, conversationId: data.conversationId }, 'socket work failed');
      if (data.closed) return;
      release(data);
      try {
        ws.end(INTERNAL_ERROR, 'internal error');
      } catch {
        // Already gone.
      }
    }
  };
  /** One client frame (undefined: binary) of a socket whose conversation was found. */
  const handleFrame = (ws: uWS.WebSocket<SocketData>, data: SocketData, raw: string | undefined): void => {
    let clientId: string | undefined;
    const fail = (error: string) => {
      if (!data.closed) ws.send(JSON.stringify(clientId === undefined ? { type: 'error', error } : { type: 'error', error, client_id: clientId }));
    };
    if (raw === undefined) return fail('Frames must be JSON text.');
    let frame: unknown;
    try {
      frame = JSON.parse(raw);
    } catch {
      return fail('The frame is not valid JSON.');
    }
    const { type, text, client_id } = (frame ?? {}) as { type?: unknown; text?: unknown; client_id?: unknown };
    if (typeof client_id === 'string' && CLIENT_ID.test(client_id)) clientId = client_id;
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
  };
  /**
   * Subscribes a socket that asked for what it missed: live events wait while the messages stored
   * after `after` are read and sent, then follow (those the catch-up already sent left out), then
   * `synced` says the socket is up to date.
   */
  const catchUp = (ws: uWS.WebSocket<SocketData>, data: SocketData, after: number): void => {
    let waiting: ConversationEvent[] | undefined = [];
    const send = (event: ConversationEvent) => {
      const frame = frameOf(event);
      if (frame !== undefined && !data.closed) ws.send(frame);
    };
    data.stopEvents = deps.engine.subscribe(data.conversationId, (event: ConversationEvent) => {
      if (waiting) waiting.push(event);
      else send(event);
    });
    deps.conversations.messagesAfter(data.conversationId, after, CATCH_UP_LIMIT).then(
      (missed) =>
        later(ws, data, () => {
          if (data.closed) return;
          const sent = new Set<number>();
          let last = after;
          for (const message of missed) {
            sent.add(message.id);
            last = Math.max(last, message.id);
            ws.send(JSON.stringify({ type: 'message', id: message.id, role: message.role, content: message.content, function_calls: [] }));
          }
          for (const event of waiting ?? []) {
            if (event.type !== 'message') send(event);
            else if (!sent.has(event.id)) {
              last = Math.max(last, event.id);
              send(event);
            }
          }
          waiting = undefined;
          ws.send(JSON.stringify({ type: 'synced', last_id: last }));
        }),
      (error: unknown) =>
        later(ws, data, () => {
          deps.logger.error({ err: error, conversationId: data.conversationId }, 'conversation catch-up failed');
          if (data.closed) return;
          release(data);
          ws.end(INTERNAL_ERROR, 'Server error.');
        }),
    );
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
      const after = catchUpFrom(req.getQuery('after'));
      const ip = clientAddress(Buffer.from(res.getRemoteAddressAsText()).toString(), req.getHeader('x-forwarded-for') || undefined, deps.trustProxy);
      // An upgrade costs database reads: it takes from the caller's budget like a REST call.
      const verdict = deps.limits.perIp.take(`ip:${ip}`);
      if (!verdict.ok) return refuse(res, '429 Too Many Requests', 'Too many requests. Please try again later.', { 'Retry-After': String(verdict.retryAfterSeconds) });
      if ((openSockets.get(conversationId) ?? 0) >= MAX_SOCKETS_PER_CONVERSATION) return refuse(res, '429 Too Many Requests', TOO_MANY_SOCKETS);
      // Only whether it was found is kept: each socket holding the conversation's row would weigh.
      const found = deps.conversations.find(conversationId).then(() => undefined);
      // Settled in open(); a socket ended before then leaves no unheard rejection.
      found.catch(() => undefined);
      res.upgrade<SocketData>({ conversationId, ip, after, found, waiting: 0, closed: false }, key, protocol, extensions, context);
    },
    open(ws) {
      const data = ws.getUserData();
      const count = openSockets.get(data.conversationId) ?? 0;
      // The upgrade's check is repeated here, where the count is taken. A socket ended here or in a
      // callback is released first: uWS runs close() inside end(), where it may not be readable.
      if (count >= MAX_SOCKETS_PER_CONVERSATION) {
        data.closed = true;
        return void ws.end(1013, TOO_MANY_SOCKETS);
      }
      openSockets.set(data.conversationId, count + 1);
      data.counted = true;
      deps.onCount?.(1);
      data.found?.then(
        () =>
          later(ws, data, () => {
            data.found = undefined;
            if (data.closed) return;
            if (data.after === undefined) {
              data.stopEvents = deps.engine.subscribe(data.conversationId, (event: ConversationEvent) => {
                const frame = frameOf(event);
                if (frame !== undefined && !data.closed) ws.send(frame);
              });
            } else catchUp(ws, data, data.after);
          }),
        (error: unknown) =>
          later(ws, data, () => {
            if (data.closed) return;
            if (!(error instanceof PlatformError)) deps.logger.error({ err: error, conversationId: data.conversationId }, 'conversation lookup failed');
            const notFound = error instanceof PlatformError && error.statusCode === 404;
            release(data);
            ws.end(notFound ? NOT_FOUND : INTERNAL_ERROR, notFound ? error.message : 'Server error.');
          }),
      );
    },
    message(ws, raw, isBinary) {
      const data = ws.getUserData();
      // The frame is read now (uWS reuses its memory); it is handled once the conversation is found.
      const text = isBinary ? undefined : Buffer.from(raw).toString('utf8');
      if (!data.found) return handleFrame(ws, data, text);
      if (++data.waiting > MAX_WAITING_FRAMES) {
        release(data);
        return void ws.end(POLICY_VIOLATION, 'Too many frames before the conversation was found.');
      }
      data.found.then(() => later(ws, data, () => handleFrame(ws, data, text)), () => undefined);
    },
    close(ws) {
      let data: SocketData;
      try {
        data = ws.getUserData();
      } catch {
        return;
      }
      release(data);
    },
  }));
}
