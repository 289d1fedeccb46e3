/**
 * The uWS transport, driven over real sockets with a router of test routes:
 * 1. unknown route 404 {message: "Not found."}; wrong method 405 with Allow.
 * 2. malformed JSON 400 {message}; a JSON body over 1 MB 413 (declared and chunked); multipart
 *    accepted up to its own limit on routes that take uploads, refused elsewhere.
 * 3. an uncaught error is 500 with a generic message, the route family's shape, no stack.
 * 4. CORS preflight and headers; a request id is generated or echoed.
 * 5. query strings and form bodies decode bracket notation; path params are decoded.
 * 6. a client that goes away mid-request does not break the server or write to a closed response.
 * 7. closing stops accepting new connections but finishes the requests in flight.
 */
import { connect } from 'node:net';
import t from 'tap';
import { createHttpServer } from '../api/http/server.js';
import { Router } from '../api/http/router.js';
import { StreamBody, json } from '../api/http/types.js';
import { createLogger } from '../runtime/logger.js';
import { PlatformError } from '../runtime/errors.js';
import { Conditions } from './helpers/conditions.js';

const router = new Router();
let slowFinished: () => void = () => undefined;
const slowDone = new Promise<void>((resolve) => (slowFinished = resolve));
let slowStarted: () => void = () => undefined;
const slowRunning = new Promise<void>((resolve) => (slowStarted = resolve));
let releaseSlow: () => void = () => undefined;
const lines: Array<Record<string, unknown>> = [];
const logged = new Conditions();

router.add({ method: 'POST', path: '/echo', auth: 'none', responses: {}, handler: (req) => json(200, { body: req.body, query: req.query }) });
const STREAMED = 12_000_000;
router.add({
  method: 'GET',
  path: '/stream',
  auth: 'none',
  responses: {},
  handler: () => ({
    status: 200,
    headers: { 'Content-Type': 'application/octet-stream' },
    body: new StreamBody(STREAMED, async function* () {
      for (let sent = 0; sent < STREAMED; sent += 100_000) yield Buffer.alloc(Math.min(100_000, STREAMED - sent), 97);
    }),
  }),
});
router.add({ method: 'GET', path: '/echo/:id', auth: 'none', responses: {}, handler: (req) => json(200, { params: req.params, query: req.query, id: req.id }) });
router.add({
  method: 'POST',
  path: '/upload',
  auth: 'none',
  responses: {},
  multipart: true,
  handler: (req) => json(200, { fields: req.body, files: Object.values(req.files).map((f) => ({ field: f.field, name: f.filename, size: f.data.length, type: f.contentType })) }),
});
router.add({ method: 'GET', path: '/boom', auth: 'none', responses: {}, family: 'error', failureMessage: 'Failed to do it. Please try again.', handler: () => {
  throw new Error('secret internal detail');
} });
router.add({ method: 'GET', path: '/boom-plain', auth: 'none', responses: {}, handler: () => {
  throw new TypeError('undefined is not a function');
} });
router.add({ method: 'GET', path: '/conversation-error', auth: 'none', responses: {}, family: 'conversation', handler: () => {
  throw new PlatformError('not_found', { message: 'Conversation not found' });
} });
router.add({ method: 'GET', path: '/slow', auth: 'none', responses: {}, handler: async () => {
  const release = new Promise<void>((resolve) => (releaseSlow = resolve));
  slowStarted();
  await release;
  slowFinished();
  return json(200, { ok: true });
} });

/** A streamed answer that waits for the test: its client can leave before the handler returns. */
let slowStream: { started: () => void; release: Promise<void> } | undefined;
router.add({ method: 'GET', path: '/slow-stream', auth: 'none', responses: {}, handler: async () => {
  slowStream!.started();
  await slowStream!.release;
  return { status: 200, body: new StreamBody(3, async function* () {
    yield Buffer.from('abc');
  }) };
} });

let gateWaiting: (open: () => void) => void = () => undefined;
router.add({ method: 'GET', path: '/gate', auth: 'none', responses: {}, handler: async () => {
  await new Promise<void>((open) => gateWaiting(open));
  return json(200, { finished: true });
} });

const server = createHttpServer({
  router,
  logger: createLogger('info', { write: (line: string) => (lines.push(JSON.parse(line)), logged.changed()) }),
  authenticate: async () => undefined,
  jsonBodyLimit: 1024 * 1024,
  multipartBodyLimit: 3 * 1024 * 1024,
});
const port = await server.listen('127.0.0.1', 0);
t.teardown(() => server.close());
const base = `http://127.0.0.1:${port}`;

t.test('unknown routes and methods', async (t) => {
  const missing = await fetch(`${base}/nowhere`);
  t.equal(missing.status, 404);
  t.same(await missing.json(), { message: 'Not found.' });
  const wrong = await fetch(`${base}/echo`, { method: 'GET' });
  t.equal(wrong.status, 405);
  t.equal(wrong.headers.get('allow'), 'POST');
});

t.test('bodies', async (t) => {
  const bad = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":' });
  t.equal(bad.status, 400);
  t.same(await bad.json(), { message: 'The request body is not valid JSON.' });

  const ok = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ a: [1, { b: 'ü' }] }) });
  t.same(((await ok.json()) as any).body, { a: [1, { b: 'ü' }] });

  const big = JSON.stringify({ data: 'x'.repeat(1024 * 1024) });
  const declared = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
  t.equal(declared.status, 413);
  t.same(await declared.json(), { message: 'The request body is too large.' });

  const chunks = new ReadableStream({
    start(controller) {
      for (let i = 0; i < 20; i++) controller.enqueue(new TextEncoder().encode('x'.repeat(64 * 1024)));
      controller.close();
    },
  });
  const chunked = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chunks, duplex: 'half' } as RequestInit);
  t.equal(chunked.status, 413, 'chunked body over the limit');

  const form = new FormData();
  form.set('name', 'Manual');
  form.set('links[0][link]', 'https://example.com');
  form.set('file', new Blob([new Uint8Array(2 * 1024 * 1024)], { type: 'application/pdf' }), 'manual.pdf');
  const upload = await fetch(`${base}/upload`, { method: 'POST', body: form });
  t.equal(upload.status, 200, 'multipart over the JSON limit accepted on an upload route');
  t.same(await upload.json(), {
    fields: { name: 'Manual', links: [{ link: 'https://example.com' }] },
    files: [{ field: 'file', name: 'manual.pdf', size: 2 * 1024 * 1024, type: 'application/pdf' }],
  });

  const raw = (boundary: string) =>
    [`--${boundary}`, 'Content-Disposition: form-data; name="name"', '', 'Quoted', `--${boundary}`, 'Content-Disposition: form-data; name="__proto__"; filename="x.txt"', 'Content-Type: text/plain', '', 'hi', `--${boundary}`, 'Content-Disposition: form-data; filename="y.txt"', '', 'anonymous', `--${boundary}--`, ''].join('\r\n');
  for (const contentType of ['multipart/form-data; boundary="XyZ"', 'multipart/form-data; charset=utf-8; Boundary=XyZ']) {
    const quoted = await fetch(`${base}/upload`, { method: 'POST', headers: { 'content-type': contentType }, body: raw('XyZ') });
    t.same([quoted.status, await quoted.json()], [200, { fields: { name: 'Quoted' }, files: [] }], `${contentType}: read; a part named __proto__ or nothing is nobody's`);
  }
  const unparsable = await fetch(`${base}/upload`, { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=Other' }, body: raw('XyZ') });
  t.equal(unparsable.status, 400, 'a body with no part of its declared boundary');

  const tooBig = new FormData();
  tooBig.set('file', new Blob([new Uint8Array(4 * 1024 * 1024)]), 'big.bin');
  t.equal((await fetch(`${base}/upload`, { method: 'POST', body: tooBig })).status, 413);

  const notUpload = new FormData();
  notUpload.set('a', 'b');
  const refused = await fetch(`${base}/echo`, { method: 'POST', body: notUpload });
  t.equal(refused.status, 415);

  const urlencoded = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'To=%2B15551234567&ids[]=1&ids[]=2&__proto__[x]=1' });
  t.same(((await urlencoded.json()) as any).body, { To: '+15551234567', ids: ['1', '2'] });
});

t.test('uncaught errors are generic 500s in the route family', async (t) => {
  const boom = await fetch(`${base}/boom`);
  t.equal(boom.status, 500);
  const text = await boom.text();
  t.same(JSON.parse(text), { error: 'Failed to do it. Please try again.' });
  t.notMatch(text, /secret|stack|at /);
  const plain = await fetch(`${base}/boom-plain`);
  t.same(await plain.json(), { message: 'Server error.' });
  const conversation = await fetch(`${base}/conversation-error`);
  t.equal(conversation.status, 404);
  t.same(await conversation.json(), { status: false, error: 'Conversation not found' });
});

t.test('CORS and request ids', async (t) => {
  const preflight = await fetch(`${base}/echo`, { method: 'OPTIONS', headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST' } });
  t.equal(preflight.status, 204);
  t.equal(preflight.headers.get('access-control-allow-origin'), '*');
  t.match(preflight.headers.get('access-control-allow-headers'), /Authorization/);
  t.match(preflight.headers.get('access-control-allow-methods'), /POST/);

  const generated = await fetch(`${base}/echo/1`);
  t.match(generated.headers.get('x-request-id'), /^[0-9a-f-]{36}$/);
  t.equal(generated.headers.get('access-control-allow-origin'), '*');
  const echoed = await fetch(`${base}/echo/1`, { headers: { 'x-request-id': 'trace-abc.123' } });
  t.equal(echoed.headers.get('x-request-id'), 'trace-abc.123');
  t.equal(((await echoed.json()) as any).id, 'trace-abc.123');
  const hostile = await fetch(`${base}/echo/1`, { headers: { 'x-request-id': 'bad id\twith spaces' } });
  t.not(hostile.headers.get('x-request-id'), 'bad id\twith spaces');
});

t.test('query strings and params', async (t) => {
  const res = await fetch(`${base}/echo/caf%C3%A9?type=widget&page=2&tags[]=a&tags[]=b&f[from]=2026-01-01`);
  t.same(await res.json().then((b: any) => ({ params: b.params, query: b.query })), {
    params: { id: 'café' },
    query: { type: 'widget', page: '2', tags: ['a', 'b'], f: { from: '2026-01-01' } },
  });
  t.equal((await fetch(`${base}/echo/%E0%A4%A`)).status, 404, 'undecodable param is not found');
});

t.test('a client that disconnects mid-request', async (t) => {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
  await slowRunning;
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.destroy();
  await closed;
  // A full round trip after the close: the server has handled the earlier socket's close event.
  t.equal((await fetch(`${base}/echo/0`)).status, 200);
  releaseSlow();
  await slowDone;
  const after = await fetch(`${base}/echo/1`);
  t.equal(after.status, 200, 'server still serving after writing nothing to the closed response');
  t.match(lines.find((line) => line.path === '/slow'), { status: 200, aborted: true }, 'the response was known to be aborted');

  const partial = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => partial.once('connect', () => resolve()));
  partial.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":');
  const partialClosed = new Promise((resolve) => partial.once('close', resolve));
  partial.destroy();
  await partialClosed;
  t.equal((await fetch(`${base}/echo/2`)).status, 200, 'half-sent body aborted cleanly');
});

t.test('a client that leaves before its streamed answer is ready: the server goes on', async (t) => {
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  let release!: () => void;
  slowStream = { started, release: new Promise<void>((resolve) => (release = resolve)) };
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write('GET /slow-stream HTTP/1.1\r\nHost: x\r\n\r\n');
  await running;
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.destroy();
  await closed;
  t.equal((await fetch(`${base}/echo/0`)).status, 200, 'the close has been handled');
  release();
  // Once used, the aborted response threw inside the stream's promise, which nothing heard: the process ended.
  await logged.until(() => lines.some((line) => line.path === '/slow-stream'));
  t.equal((await fetch(`${base}/echo/1`)).status, 200, 'still serving');
  t.match(lines.find((line) => line.path === '/slow-stream'), { status: 200, aborted: true });
  t.notOk(lines.some((line) => /streamed response failed|could not be written/.test(String(line.msg))), 'nothing failed');
});

t.test('close finishes in-flight requests and stops accepting', async (t) => {
  const second = createHttpServer({ router, logger: createLogger('silent'), authenticate: async () => undefined, jsonBodyLimit: 1024, multipartBodyLimit: 1024 });
  const secondPort = await second.listen('127.0.0.1', 0);
  const waiting = new Promise<() => void>((resolve) => (gateWaiting = resolve));
  const inFlight = fetch(`http://127.0.0.1:${secondPort}/gate`);
  const open = await waiting;
  let closed = false;
  const closing = second.close().then(() => (closed = true));
  await t.rejects(fetch(`http://127.0.0.1:${secondPort}/echo/1`), 'new connections refused while closing');
  t.equal(closed, false, 'close waits for the request in flight');
  open();
  const response = await inFlight;
  t.equal(response.status, 200);
  t.same(await response.json(), { finished: true });
  await closing;
  t.equal(closed, true);
});

t.test('a request with two different Content-Length headers is refused, not read two ways', async (t) => {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  let answer = '';
  socket.on('data', (data: Buffer) => (answer += data.toString()));
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 0\r\n\r\n{}');
  await closed;
  t.match(answer, /^HTTP\/1\.1 400 /);
  t.match(answer, /The request repeats a header that may appear once\./);
});

t.test('the client address behind trusted proxies (TRUST_PROXY)', async (t) => {
  const { clientAddress } = await import('../api/http/params.js');
  t.equal(clientAddress('10.0.0.5', '203.0.113.7', 0), '10.0.0.5', 'no proxy trusted: the peer, whatever the header says');
  t.equal(clientAddress('10.0.0.5', '203.0.113.7', 1), '203.0.113.7', 'one proxy: what it saw');
  t.equal(clientAddress('10.0.0.5', '198.51.100.9, 203.0.113.7', 1), '203.0.113.7', 'an entry the client wrote itself is not believed');
  t.equal(clientAddress('10.0.0.5', '198.51.100.9, 203.0.113.7, 10.0.0.4', 2), '203.0.113.7', 'two proxies');
  t.equal(clientAddress('10.0.0.5', '203.0.113.7', 3), '203.0.113.7', 'fewer hops than trusted: the farthest');
  t.equal(clientAddress('10.0.0.5', undefined, 1), '10.0.0.5');
});

t.test('a streamed body reaches a client that reads at its own slow pace, whole', async (t) => {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write('GET /stream HTTP/1.1\r\nHost: x\r\n\r\n');
  // About 5 MB/s: the server's writes are refused again and again and must resume each time.
  const body = await new Promise<number>((resolve) => {
    let head = Buffer.alloc(0);
    let bodyBytes = -1;
    let sincePause = 0;
    // A download that stalls is reported with what arrived, rather than left to the test timeout.
    setTimeout(() => resolve(bodyBytes), 20_000).unref();
    socket.on('data', (data: Buffer) => {
      if (bodyBytes < 0) {
        head = Buffer.concat([head, data]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        bodyBytes = head.length - end - 4;
      } else bodyBytes += data.length;
      sincePause += data.length;
      if (bodyBytes >= STREAMED) return resolve(bodyBytes);
      if (sincePause > 50_000) {
        sincePause = 0;
        socket.pause();
        setTimeout(() => socket.resume(), 10);
      }
    });
  });
  socket.destroy();
  t.equal(body, STREAMED);
});
