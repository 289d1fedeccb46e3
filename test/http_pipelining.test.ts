/**
 * HTTP/1.1 pipelining on one connection. uWS reads a request only once the answer before it has
 * been given; one that arrives while an earlier answer is still being worked on closes the
 * connection (its HttpContext refuses "async pipelining"). What a client sees:
 * 1. an answer given at once (`GET /api/docs`), then one that waits on the database
 *    (`GET /api/user`), written back to back: both answered, in order, and the connection stays.
 * 2. the one that waits on the database first, then another, written back to back: the connection
 *    closes with no answer to either, so a client retries both on a new connection; the first ran
 *    and is logged as aborted, the second was never routed.
 * 3. the same two, each sent once the answer before it has arrived (how clients and proxies use a
 *    connection, and how a client retries): both answered on one connection.
 */
import { connect } from 'node:net';
import t from 'tap';
import { Conditions } from './helpers/conditions.js';
import { startTestPlatform } from './helpers/platform.js';

const lines: Array<Record<string, unknown>> = [];
const logged = new Conditions();
const api = await startTestPlatform(t, {}, {}, (line) => (lines.push(line), logged.changed()));
const owner = await api.user('Owner');
const port = Number(new URL(api.origin).port);

const get = (path: string, id: string): string => `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${owner.token}\r\nX-Request-Id: ${id}\r\n\r\n`;

interface Conversation {
  /** Status line and request id of each whole answer, in arrival order. */
  readonly answers: Array<{ status: string; id: string | undefined }>;
  /** Bytes received beyond the whole answers. */
  readonly rest: string;
  /** Whether the server closed the connection. */
  readonly closed: boolean;
}

/**
 * Sends `requests` on one connection, all at once (`pipelined`) or each once the answer before it
 * has arrived, and collects answers until every one has arrived or the server closes.
 */
function converse(requests: string[], pipelined: boolean): Promise<Conversation> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const answers: Conversation['answers'] = [];
    let buffer = Buffer.alloc(0);
    const settle = (closed: boolean): void => {
      socket.removeAllListeners();
      socket.destroy();
      resolve({ answers, rest: buffer.toString(), closed });
    };
    socket.on('connect', () => socket.write(pipelined ? requests.join('') : requests[0]!));
    socket.on('data', (data: Buffer) => {
      buffer = Buffer.concat([buffer, data]);
      for (;;) {
        const headEnd = buffer.indexOf('\r\n\r\n');
        if (headEnd < 0) return;
        const head = buffer.subarray(0, headEnd).toString();
        const end = headEnd + 4 + Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end) return;
        answers.push({ status: head.split('\r\n')[0]!, id: /\r\nx-request-id: (\S+)/i.exec(head)?.[1] });
        buffer = buffer.subarray(end);
        if (answers.length === requests.length) return settle(false);
        if (!pipelined) socket.write(requests[answers.length]!);
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => settle(true));
  });
}

t.test('an answer given at once, then one that waits: both answered in order', async (t) => {
  const result = await converse([get('/api/docs', 'sync-1a'), get('/api/user', 'sync-1b')], true);
  t.same(result, { answers: [{ status: 'HTTP/1.1 200 OK', id: 'sync-1a' }, { status: 'HTTP/1.1 200 OK', id: 'sync-1b' }], rest: '', closed: false });
});

t.test('behind an answer still being worked on: the connection closes unanswered; the first ran, the second never did', async (t) => {
  const result = await converse([get('/api/user', 'async-2a'), get('/api/docs', 'async-2b')], true);
  t.same(result, { answers: [], rest: '', closed: true }, 'no byte of either answer, then the close a client retries after');
  // The first request's handler finishes on its own; its log line says the client had gone.
  await logged.until(() => lines.some((line) => line.reqId === 'async-2a'));
  t.match(lines.find((line) => line.reqId === 'async-2a'), { path: '/api/user', status: 200, aborted: true });
  // Routing logs a synchronous answer at once, so it would be in the log before the first's line.
  t.notOk(lines.some((line) => line.reqId === 'async-2b'), 'the request behind it never reached a handler');
});

t.test('each request sent once the answer before it arrived: both answered on one connection', async (t) => {
  const result = await converse([get('/api/user', 'retry-3a'), get('/api/docs', 'retry-3b'), get('/api/user', 'retry-3c')], false);
  t.same(result.answers, [
    { status: 'HTTP/1.1 200 OK', id: 'retry-3a' },
    { status: 'HTTP/1.1 200 OK', id: 'retry-3b' },
    { status: 'HTTP/1.1 200 OK', id: 'retry-3c' },
  ]);
  t.equal(result.closed, false, 'the connection stayed open');
});
