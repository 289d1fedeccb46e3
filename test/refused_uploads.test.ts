/**
 * A refused upload's answer reaches the client; the rest of the body is read and thrown away up
 * to a bound, then the connection closes (RFC 9112 §9.6):
 * 1. Node's fetch, in a process of its own, reads the 413/422/401 of a JSON body of 5 MB, a
 *    multipart file of 25 MB (both with a length) and a chunked body without one, each three times.
 * 2. curl reads the same answers, with and without `Expect: 100-continue` (skipped without curl).
 * 3. A body that ends within the bound is read to its end, then the connection closes cleanly (a
 *    FIN, no reset): declared over the limit, over the limit while arriving chunked, and a 401 for a
 *    token found bad while the body arrives (the client sends the rest only after reading it).
 * 4. A raw socket that never stops sending reads the answer, and the connection is closed once the
 *    bound in bytes is passed (the default 64 MiB on the platform, then 1 MiB injected); one that
 *    trickles is closed once the bound in time is passed (500 ms injected).
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { createHttpServer } from '../api/http/server.js';
import { Router } from '../api/http/router.js';
import { json } from '../api/http/types.js';
import { createLogger } from '../runtime/logger.js';
import { startTestPlatform } from './helpers/platform.js';
import type { UploadPlan, UploadResult } from './helpers/uploadClient.js';

const CLIENT = fileURLToPath(new URL('./helpers/uploadClient.ts', import.meta.url));
const TOO_LARGE = { message: 'The request body is too large.' };
const UNAUTHENTICATED = { message: 'Unauthenticated.' };
const FILE_TOO_LARGE = 'The file may not be greater than 20480 kilobytes.';
const MB = 1_000_000;

/** Runs the plans in a client process of its own (see the helper for why); each result in plan order. */
function runClient(plans: UploadPlan[]): Promise<UploadResult[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLIENT, JSON.stringify(plans)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (data: Buffer) => (output += data.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(output) as UploadResult[]) : reject(new Error(`the upload client exited with ${code}`))));
  });
}

/** The status and JSON body of a raw answer. */
function parsed(answer: string): { status: number; body: unknown } {
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1]);
  const headEnd = answer.indexOf('\r\n\r\n');
  return { status, body: headEnd < 0 ? undefined : JSON.parse(answer.slice(headEnd + 4)) };
}

const api = await startTestPlatform(t);
const owner = await api.user('Owner');
const kb = (await api.request('POST', '/user/knowledgebases', { token: owner.token, body: { name: 'Manuals' } })).body.data.id as number;
const assistantUrl = `${api.origin}/api/user/assistant`;
const documentsUrl = `${api.origin}/api/user/knowledgebases/${kb}/documents`;

t.test("Node's fetch reads every refusal of an upload still being sent", async (t) => {
  const cases: Array<{ label: string; plan: UploadPlan; expected: { status: number; body: unknown } }> = [
    { label: 'JSON of 5 MB', plan: { client: 'fetch', url: assistantUrl, token: owner.token, body: 'json', size: 5 * MB }, expected: { status: 413, body: TOO_LARGE } },
    {
      label: 'multipart file of 25 MB',
      plan: { client: 'fetch', url: documentsUrl, token: owner.token, body: 'multipart', size: 25 * MB },
      expected: { status: 422, body: { message: FILE_TOO_LARGE, errors: { file: [FILE_TOO_LARGE] } } },
    },
    { label: 'chunked JSON of 5 MB without a length', plan: { client: 'fetch', url: assistantUrl, token: owner.token, body: 'chunked', size: 5 * MB }, expected: { status: 413, body: TOO_LARGE } },
    { label: 'anonymous JSON of 5 MB', plan: { client: 'fetch', url: assistantUrl, body: 'json', size: 5 * MB }, expected: { status: 401, body: UNAUTHENTICATED } },
    { label: 'anonymous multipart file of 25 MB', plan: { client: 'fetch', url: documentsUrl, body: 'multipart', size: 25 * MB }, expected: { status: 401, body: UNAUTHENTICATED } },
  ];
  const rounds = [...cases, ...cases, ...cases];
  const results = await runClient(rounds.map((c) => c.plan));
  rounds.forEach((c, i) => t.same(results[i], c.expected, c.label));
  t.equal((await api.request('GET', '/user', { token: owner.token })).status, 200, 'the server still answers');
});

const curlMissing = spawnSync('curl', ['--version']).error !== undefined;
t.test('curl reads every refusal of an upload still being sent', { skip: curlMissing && 'curl is not installed' }, async (t) => {
  const run = promisify(execFile);
  const dir = await mkdtemp(join(tmpdir(), 'ap-uploads-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const small = join(dir, 'five.json');
  const large = join(dir, 'manual.pdf');
  await writeFile(small, Buffer.alloc(5 * MB, 32));
  await writeFile(large, Buffer.alloc(25 * MB));
  const auth = ['-H', `Authorization: Bearer ${owner.token}`];
  const jsonBody = ['-H', 'Content-Type: application/json', '--data-binary', `@${small}`];
  const cases: Array<{ label: string; args: string[]; expected: { status: number; body: unknown } }> = [
    { label: 'JSON of 5 MB', args: [...auth, ...jsonBody, assistantUrl], expected: { status: 413, body: TOO_LARGE } },
    {
      label: 'multipart file of 25 MB',
      args: [...auth, '-F', 'name=Manual', '-F', `file=@${large};type=application/pdf`, documentsUrl],
      expected: { status: 422, body: { message: FILE_TOO_LARGE, errors: { file: [FILE_TOO_LARGE] } } },
    },
    { label: 'chunked JSON of 5 MB', args: [...auth, '-H', 'Transfer-Encoding: chunked', ...jsonBody, assistantUrl], expected: { status: 413, body: TOO_LARGE } },
    { label: 'anonymous JSON of 5 MB', args: [...jsonBody, assistantUrl], expected: { status: 401, body: UNAUTHENTICATED } },
  ];
  for (const c of cases) {
    // curl asks for `100 Continue` before a large body unless told not to; without it the body is on its way at once.
    for (const expect of ['Expect: 100-continue', 'Expect:']) {
      const { stdout } = await run('curl', ['-sS', '--http1.1', '-H', expect, '-w', '\n%{http_code}', ...c.args], { maxBuffer: 1024 * 1024 });
      const lines = stdout.split('\n');
      const status = Number(lines.pop());
      t.same({ status, body: JSON.parse(lines.join('\n')) }, c.expected, `${c.label} (${expect === 'Expect:' ? 'sent at once' : 'after 100 Continue'})`);
    }
  }
});

/** A bare transport with small limits and bounds, so the bounds are reached in milliseconds. */
async function boundedServer(t: Test, bound: { bytes: number; ms: number }): Promise<number> {
  const router = new Router();
  router.add({ method: 'POST', path: '/echo', auth: 'none', responses: {}, handler: (req) => json(200, { body: req.body }) });
  router.add({ method: 'POST', path: '/private', auth: 'user', responses: {}, handler: () => json(200, { ok: true }) });
  const server = createHttpServer({
    router,
    logger: createLogger('silent'),
    authenticate: async () => undefined,
    jsonBodyLimit: 64 * 1024,
    multipartBodyLimit: 64 * 1024,
    refusedBodyDrain: bound,
  });
  t.teardown(() => server.close(0));
  return server.listen('127.0.0.1', 0);
}

t.test('a refused body that ends within the bound is read to its end, then the connection closes cleanly', async (t) => {
  const port = await boundedServer(t, { bytes: 64 * 1024 * 1024, ms: 60_000 });
  const post = (path: string, framing: string, extra = ''): string => `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}${framing}\r\n\r\n`;
  const results = await runClient([
    { client: 'raw', port, head: post('/echo', 'Content-Length: 3000000'), send: 'exactly', size: 3_000_000 },
    { client: 'raw', port, head: post('/echo', 'Transfer-Encoding: chunked'), send: 'exactly', size: 3_000_000, before: 100_000 },
    { client: 'raw', port, head: post('/private', 'Content-Length: 60000', 'Authorization: Bearer wrong\r\n'), send: 'exactly', size: 60_000, before: 1000 },
  ]);
  const labels = ['declared over the limit', 'over the limit while arriving chunked', 'a bad token found while the body arrives'];
  const expected = [
    { status: 413, body: TOO_LARGE },
    { status: 413, body: TOO_LARGE },
    { status: 401, body: UNAUTHENTICATED },
  ];
  results.forEach((result, i) => {
    const raw = result as Extract<UploadResult, { answer: string }>;
    t.same(parsed(raw.answer), expected[i], `${labels[i]}: the answer`);
    t.match(raw.answer, /\r\nConnection: close\r\n/, `${labels[i]}: says the connection closes`);
    t.equal(raw.ended, 'end', `${labels[i]}: closed with a FIN once the body was read, not reset`);
  });
});

t.test('a client that never stops sending reads its answer, and is cut off past the bound', async (t) => {
  // The default bounds, on the platform: the answer reaches a client that never pauses, and the
  // connection is closed once 64 MiB more have been read (the bound in time, 30 s, outlasts the test).
  const head = (framing: string): string => `POST /api/user/assistant HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${owner.token}\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`;
  const port = Number(new URL(api.origin).port);
  const [declared, chunked] = await runClient([
    { client: 'raw', port, head: head('Content-Length: 999999999'), send: 'forever' },
    { client: 'raw', port, head: head('Transfer-Encoding: chunked'), send: 'forever' },
  ]);
  for (const [label, result] of [['declared length', declared], ['chunked', chunked]] as const) {
    const raw = result as Extract<UploadResult, { answer: string }>;
    t.same(parsed(raw.answer), { status: 413, body: TOO_LARGE }, `${label}: the answer arrived`);
    // Closed past the bound: with the client's bytes still unread a reset, otherwise a FIN (which
    // one is a matter of timing, not of what the server does).
    t.not(raw.afterAnswerMs, undefined, `${label}: the connection was closed after the answer, mid-body`);
  }

  // Small bounds: a client that has read its answer and sends on is cut off by the bound in bytes
  // (the bound in time, a minute, would outlast the test), one that trickles by the bound in time.
  const byBytes = await boundedServer(t, { bytes: 1024 * 1024, ms: 60_000 });
  const byTime = await boundedServer(t, { bytes: 64 * 1024 * 1024, ms: 500 });
  const echo = 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
  const [sending, trickling] = await runClient([
    { client: 'raw', port: byBytes, head: echo, send: 'forever', before: 100_000 },
    { client: 'raw', port: byTime, head: echo, send: 'trickle' },
  ]);
  for (const [label, result] of [['sending on', sending], ['trickling', trickling]] as const) {
    const raw = result as Extract<UploadResult, { answer: string }>;
    t.same(parsed(raw.answer), { status: 413, body: TOO_LARGE }, `${label}: the answer arrived`);
    t.not(raw.afterAnswerMs, undefined, `${label}: closed after the answer`);
  }
  t.ok((trickling as { afterAnswerMs: number }).afterAnswerMs >= 450, 'the trickle is cut at the bound in time, not before');
});
