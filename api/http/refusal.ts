import type uWS from 'uWebSockets.js';

/**
 * Refusing a request whose body is still on its way (a 401 or 413 decided before or while the body
 * arrives) without losing the answer. Closing at once is what loses it: the client is still
 * writing, the kernel answers its next segment with a reset, and a client that meets the reset
 * while writing (Node's `fetch` does: `write EPIPE`) never reads the answer waiting for it. So the
 * answer goes out at once, with `Connection: close`, and the rest of the body is read and thrown
 * away until it ends or a bound is reached, and only then is the connection closed (RFC 9112
 * §9.6). Nothing of the body is kept.
 *
 * Why the answer is written without ending the uWS response (checked on v20.30 and in upstream's
 * current source): uWS has no half-close; `end(body, true)` shuts the socket and closes it on the
 * spot (the reset above); and after `end(body, false)` the response object may no longer be used,
 * so the connection cannot be closed at a bound, while uWS keeps handing the rest of the body to
 * `onData` and re-arms its own idle timer at every 160 KB, so a client sending fast is never cut
 * off. `writeHeader` writes `name: value\r\n` verbatim, so the whole answer is written through it
 * while the response stays open, which keeps `close()` for when the drain ends.
 */

/** How much of a refused body is read, and for how long, after the answer is sent. */
export interface DrainBound {
  /** Bytes read after the answer before the connection is closed mid-body. */
  readonly bytes: number;
  /** Milliseconds after the answer before the connection is closed mid-body. */
  readonly ms: number;
}

/**
 * 64 MiB: three times the largest body accepted (21 MiB multipart), so an ordinary client that
 * sends a file too large for an upload, or a proxy that forwards one, is read to its end and reads
 * its answer; on a 1 Gbit/s network that is half a second of discarding. 30 s: the time a slow
 * uplink gets to finish (nginx's `lingering_time` default); about 18 Mbit/s sends 64 MiB in that
 * time. A client slower than 16 KB/s is cut earlier by uWS's own idle rule (about 10 s). Past
 * either bound the client is not an ordinary one, and the connection is closed.
 */
export const REFUSED_BODY_DRAIN = { bytes: 64 * 1024 * 1024, ms: 30_000 } as const satisfies DrainBound;

/** What a drain needs of an exchange: its open response, whether the client has gone, a hook for when it goes. */
export interface OpenExchange {
  readonly aborted: boolean;
  readonly res: uWS.HttpResponse;
  onAbort?: () => void;
}

/**
 * Writes the rest of an answer after its status line and headers (inside the caller's `cork`):
 * `Connection: close`, `Date`, the body (JSON, or none) with its length, all through `writeHeader`
 * so the uWS response stays open. A body ends with CRLF (JSON whitespace) so that the CRLF
 * `writeHeader` appends after the last value is the body's own last two bytes.
 */
export function writeAnswerLeavingOpen(res: uWS.HttpResponse, body: unknown, hasType: boolean): void {
  res.writeHeader('Connection', 'close');
  res.writeHeader('Date', new Date().toUTCString());
  if (body === undefined) {
    res.writeHeader('Content-Length', '0\r\n');
    return;
  }
  const payload = `${JSON.stringify(body)}\r\n`;
  if (!hasType) res.writeHeader('Content-Type', 'application/json');
  res.writeHeader('Content-Length', `${Buffer.byteLength(payload)}\r\n\r\n${payload.slice(0, -2)}`);
}

/**
 * Reads and discards the rest of a refused body once its answer is written: the connection is
 * closed when the body ends (nothing unread, so the client gets a plain FIN), past `bound.bytes`
 * more bytes, or `bound.ms` after the answer, whichever comes first. Feed it every later chunk.
 */
export class BodyDrain {
  private read = 0;
  private finished = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly exchange: OpenExchange,
    private readonly bound: DrainBound,
  ) {
    this.timer = setTimeout(() => this.close(), bound.ms);
    this.timer.unref();
    exchange.onAbort = () => this.stop();
  }

  /** Counts a chunk of the body (`bytes` may be 0); `last` when the body has ended. */
  take(bytes: number, last: boolean): void {
    this.read += bytes;
    if (last || this.read > this.bound.bytes) this.close();
  }

  private stop(): void {
    this.finished = true;
    clearTimeout(this.timer);
  }

  private close(): void {
    if (this.finished) return;
    this.stop();
    // Not from inside uWS's read of the socket: the answer may still be in its cork buffer, which a
    // close there throws away. uWS reports its own close through onAborted.
    setImmediate(() => {
      if (!this.exchange.aborted) this.exchange.res.close();
    });
  }
}
