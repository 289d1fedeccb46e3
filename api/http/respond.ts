import { STATUS_CODES } from 'node:http';
import type uWS from 'uWebSockets.js';
import type { Logger } from '../../runtime/logger.js';
import { BodyDrain, writeAnswerLeavingOpen, type DrainBound } from './refusal.js';
import type { ApiResponse, StreamBody } from './types.js';

/**
 * Writing answers back through uWS: a plain response inside one `cork`, a `StreamBody` at the
 * pace the client takes it, and a refusal whose request body is still arriving (answered at once,
 * the rest of the body read and thrown away; `refusal.ts`).
 */

const CORS_HEADERS: Readonly<Record<string, string>> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'X-Request-Id, Retry-After',
};

function statusLine(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
}

export interface Exchange {
  aborted: boolean;
  readonly res: uWS.HttpResponse;
  /** Told when the client goes away (a streamed body waiting to write stops). */
  onAbort?: () => void;
  /** Set once a refusal is answered while its body is still arriving: takes the rest of it. */
  drain?: BodyDrain;
}

/**
 * How a written answer leaves the connection: open for the next request, closed at once (the
 * request's framing cannot be trusted), or closed once the rest of a refused body is read
 * (`refusal.ts`).
 */
export type Ending = 'reuse' | 'close' | 'drain';

export function writeHead(res: uWS.HttpResponse, requestId: string, response: ApiResponse): void {
  res.writeStatus(statusLine(response.status));
  res.writeHeader('X-Request-Id', requestId);
  for (const [name, value] of Object.entries(CORS_HEADERS)) res.writeHeader(name, value);
  for (const [name, value] of Object.entries(response.headers ?? {})) res.writeHeader(name, value);
}

/**
 * Sends a `StreamBody` chunk by chunk, each when the socket has taken the one before (uWS
 * backpressure: `tryEnd`, then the rest of the chunk from the one `onWritable` handler), so a large
 * file is never held in memory whole and a slow client slows only its own download. The first
 * chunk is read before anything is written, so a source that fails at once is a 500; one that
 * fails or ends short later closes the connection (the promised length cannot be met); an aborted
 * request stops the reading.
 */
export async function streamBody(exchange: Exchange, requestId: string, response: ApiResponse, body: StreamBody, log: Logger): Promise<void> {
  // A client gone while the handler worked (a player cancelling its first range request): uWS
  // throws on any use of the response now, and nothing of the body has been opened yet.
  if (exchange.aborted) return;
  const { res } = exchange;
  let headed = false;
  let finished = false;
  // The chunk the socket has not taken yet, from which write offset, and who waits for it.
  let waiting: { data: Buffer; from: number; taken: (ok: boolean) => void } | undefined;
  const send = (data: Buffer): boolean => {
    let ok = false;
    res.cork(() => {
      if (!headed) writeHead(res, requestId, response);
      headed = true;
      const [sent, done] = res.tryEnd(data, body.size);
      ok = sent;
      if (done) finished = true;
    });
    return ok || finished;
  };
  res.onWritable((offset) => {
    const pending = waiting;
    if (!pending) return true;
    let ok = false;
    const [sent, done] = res.tryEnd(pending.data.subarray(offset - pending.from), body.size);
    ok = sent;
    if (done) finished = true;
    if (ok || finished) {
      waiting = undefined;
      pending.taken(true);
    }
    return ok || finished;
  });
  exchange.onAbort = () => {
    const pending = waiting;
    waiting = undefined;
    pending?.taken(false);
  };
  const stop = () => {
    if (exchange.aborted || finished) return;
    finished = true;
    try {
      res.close();
    } catch {
      // Already gone.
    }
  };
  const chunks = body.chunks()[Symbol.asyncIterator]();
  try {
    let next = await chunks.next();
    while (!next.done) {
      if (exchange.aborted || finished) return;
      const from = res.getWriteOffset();
      if (!send(next.value)) {
        const taken = await new Promise<boolean>((resolve) => (waiting = { data: next.value as Buffer, from, taken: resolve }));
        if (!taken || exchange.aborted) return;
      }
      if (finished) return;
      next = await chunks.next();
    }
    if (exchange.aborted) return;
    if (!headed && body.size === 0) res.cork(() => (writeHead(res, requestId, response), res.endWithoutBody(0)));
    else stop();
  } catch (error) {
    log.warn({ err: error }, 'a streamed response failed');
    if (!headed) write(exchange, requestId, { status: 500, body: { message: 'Server error.' } }, true);
    else stop();
  } finally {
    await chunks.return?.().catch(() => undefined);
  }
}

function hasContentType(response: ApiResponse): boolean {
  return Object.keys(response.headers ?? {}).some((name) => name.toLowerCase() === 'content-type');
}

export function write(exchange: Exchange, requestId: string, response: ApiResponse, closeConnection = false): void {
  if (exchange.aborted) return;
  const { res } = exchange;
  let payload: string | Buffer | undefined;
  let contentType: string | undefined;
  if (response.body === undefined || response.status === 204) payload = undefined;
  else if (typeof response.body === 'string' || Buffer.isBuffer(response.body)) {
    payload = response.body;
    contentType = 'text/plain; charset=utf-8';
  } else {
    payload = JSON.stringify(response.body);
    contentType = 'application/json';
  }
  res.cork(() => {
    writeHead(res, requestId, response);
    if (contentType && !hasContentType(response)) res.writeHeader('Content-Type', contentType);
    if (payload === undefined) res.endWithoutBody(0, closeConnection);
    else res.end(payload, closeConnection);
  });
}

/** Answers a refusal whose body is still arriving, then reads the rest of that body (`refusal.ts`). */
export function refuseDuringBody(exchange: Exchange, requestId: string, response: ApiResponse, bound: DrainBound): void {
  if (exchange.aborted) return;
  const { res } = exchange;
  res.cork(() => {
    writeHead(res, requestId, response);
    writeAnswerLeavingOpen(res, response.body, hasContentType(response));
  });
  exchange.drain = new BodyDrain(exchange, bound);
}

/** Hands every later chunk of a body to the exchange's drain; for refusals decided before any chunk. */
export function drainBody(exchange: Exchange): void {
  exchange.res.onData((chunk, isLast) => exchange.drain?.take(chunk.byteLength, isLast));
}
