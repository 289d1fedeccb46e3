/**
 * Upload clients in a process of their own, for test/refused_uploads.test.ts. A client inside the
 * server's process shares its event loop: it reads the server's answer before it ever sees the
 * connection's reset, so it hides the very failure those tests are about (a client that is still
 * writing when the server closes gets `write EPIPE` and never reads the answer).
 *
 * Run: `node --import tsx test/helpers/uploadClient.ts '<JSON array of UploadPlan>'`; prints one
 * JSON array of UploadResult, in plan order.
 */
import { connect } from 'node:net';

export type UploadPlan =
  /** Node's fetch (undici) with a body of `size` bytes: a JSON string, a multipart file, or a stream sent chunked without a length. */
  | { readonly client: 'fetch'; readonly url: string; readonly token?: string; readonly body: 'json' | 'multipart' | 'chunked'; readonly size: number }
  /**
   * A raw socket: writes `head`, then body bytes (chunked framing when the head says so): `forever`
   * as fast as the socket takes them and never stopping; `trickle` 2 KB every 10 ms, never
   * stopping; `exactly` `size` bytes. With `before`, only that many bytes go before the answer has
   * arrived, and the rest after it.
   */
  | { readonly client: 'raw'; readonly port: number; readonly head: string; readonly send: 'forever' | 'trickle' | 'exactly'; readonly size?: number; readonly before?: number };

export type UploadResult =
  | { readonly status: number; readonly body: unknown }
  | { readonly error: string }
  | {
      /** Everything the server sent. */
      readonly answer: string;
      /** How the connection ended: `end` (the server's FIN), or the socket error's code. */
      readonly ended: string;
      /** Milliseconds from the whole answer's arrival to the connection's end. */
      readonly afterAnswerMs: number | undefined;
    };

async function viaFetch(plan: Extract<UploadPlan, { client: 'fetch' }>): Promise<UploadResult> {
  const headers: Record<string, string> = plan.token ? { authorization: `Bearer ${plan.token}` } : {};
  let body: string | FormData | ReadableStream<Uint8Array>;
  if (plan.body === 'multipart') {
    body = new FormData();
    body.set('name', 'Manual');
    body.set('file', new Blob([new Uint8Array(plan.size)], { type: 'application/pdf' }), 'manual.pdf');
  } else {
    headers['content-type'] = 'application/json';
    const text = `"${'x'.repeat(plan.size - 2)}"`;
    if (plan.body === 'json') body = text;
    else {
      const bytes = new TextEncoder().encode(text);
      body = new ReadableStream({
        start(controller) {
          for (let at = 0; at < bytes.length; at += 64 * 1024) controller.enqueue(bytes.subarray(at, at + 64 * 1024));
          controller.close();
        },
      });
    }
  }
  try {
    const response = await fetch(plan.url, { method: 'POST', headers, body, duplex: 'half' } as RequestInit);
    return { status: response.status, body: await response.json() };
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return { error: cause?.code ?? cause?.message ?? String(error) };
  }
}

function viaSocket(plan: Extract<UploadPlan, { client: 'raw' }>): Promise<UploadResult> {
  return new Promise((resolve) => {
    // Half-open allowed: a server that has closed does not stop the writes, it answers them with a reset.
    const socket = connect({ port: plan.port, host: '127.0.0.1', allowHalfOpen: true });
    const chunked = /transfer-encoding:\s*chunked/i.test(plan.head);
    let answer = '';
    let answeredAt: number | undefined;
    let ended = 'end';
    let stopped = false;
    let sentAll = plan.send !== 'exactly';
    let serverEnded = false;
    let timer: NodeJS.Timeout | undefined;
    const frame = (data: Buffer): Buffer => (chunked ? Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]) : data);
    const piece = frame(Buffer.alloc(64 * 1024, 32));

    const pump = (): void => {
      while (!stopped && socket.write(piece));
      if (!stopped) socket.once('drain', pump);
    };
    const sendExactly = (bytes: number, last: boolean): void => {
      if (bytes > 0) socket.write(frame(Buffer.alloc(bytes, 32)));
      if (last && chunked) socket.write('0\r\n\r\n');
      if (last) allSent();
    };
    // After the answer: 16 KB per write, each once the one before was taken, so a server that has
    // already closed answers one of them with a reset, which a later write reports.
    const sendRest = (bytes: number): void => {
      if (bytes <= 0) return sendExactly(0, true);
      const size = Math.min(bytes, 16 * 1024);
      socket.write(frame(Buffer.alloc(size, 32)), (error) => {
        if (!error) sendRest(bytes - size);
      });
    };
    const allSent = (): void => {
      sentAll = true;
      if (serverEnded) socket.end();
    };

    socket.on('data', (data: Buffer) => {
      answer += data.toString();
      const headEnd = answer.indexOf('\r\n\r\n');
      const length = /content-length:\s*(\d+)/i.exec(answer)?.[1];
      if (answeredAt !== undefined || headEnd < 0 || length === undefined || answer.length < headEnd + 4 + Number(length)) return;
      answeredAt = performance.now();
      if (plan.before === undefined) return;
      if (plan.send === 'exactly') sendRest((plan.size ?? 0) - plan.before);
      else if (plan.send === 'forever') pump();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => (ended = error.code ?? error.message));
    socket.on('end', () => {
      serverEnded = true;
      if (sentAll) socket.end();
    });
    socket.on('close', () => {
      stopped = true;
      clearInterval(timer);
      resolve({ answer, ended, afterAnswerMs: answeredAt === undefined ? undefined : performance.now() - answeredAt });
    });
    socket.on('connect', () => {
      socket.write(plan.head);
      if (plan.send === 'forever' && plan.before !== undefined) sendExactly(plan.before, false);
      else if (plan.send === 'forever') pump();
      else if (plan.send === 'trickle') timer = setInterval(() => socket.write(frame(Buffer.alloc(2048, 32))), 10);
      else sendExactly(plan.before ?? plan.size ?? 0, plan.before === undefined);
    });
  });
}

const plans = JSON.parse(process.argv[2] ?? '[]') as UploadPlan[];
const results: UploadResult[] = [];
for (const plan of plans) results.push(plan.client === 'fetch' ? await viaFetch(plan) : await viaSocket(plan));
process.stdout.write(JSON.stringify(results));
