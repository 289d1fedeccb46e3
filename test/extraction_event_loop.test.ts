/**
 * CPU-heavy extraction stays off the event loop: while a 300-page PDF is extracted, chunked,
 * embedded and indexed, the loop is busy less than half the time and requests keep being answered;
 * when the machine has CPU to spare, the p99 event-loop delay stays under 50 ms and no single stall
 * approaches what blocking work would cause.
 */
import { readFile } from 'node:fs/promises';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import t from 'tap';
import { makePdf } from './fixtures/pdf.js';
import { startTestPlatform } from './helpers/platform.js';

/** Total, idle and steal jiffies of all CPUs (Linux /proc/stat), or undefined elsewhere. */
async function cpuTimes(): Promise<{ total: number; idle: number; steal: number } | undefined> {
  const fields = ((await readFile('/proc/stat', 'utf8').catch(() => '')).split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  return fields.length >= 8 ? { total: fields.reduce((a, b) => a + b, 0), idle: fields[3]! + fields[4]!, steal: fields[7]! } : undefined;
}
type CpuTimes = Awaited<ReturnType<typeof cpuTimes>>;
const percent = (value: number | undefined) => (value === undefined ? 'unknown' : `${(value * 100).toFixed(0)}%`);
const share = (key: 'idle' | 'steal', a: CpuTimes, b: CpuTimes) => (a && b && b.total > a.total ? (b[key] - a[key]) / (b.total - a.total) : undefined);

const api = await startTestPlatform(t, { workerPoolSize: 1 });
const user = await api.user();
const kb = (await api.request('POST', '/user/knowledgebases', { token: user.token, body: { name: 'Big' } })).body.data.id;

const pages = Array.from({ length: 300 }, (_, p) =>
  Array.from({ length: 40 }, (_, l) => `Page ${p + 1} line ${l + 1}: the quick brown fox jumps over the lazy dog while invoices ${p * 40 + l} are filed.`),
);
const pdf = makePdf(pages);

/** Uploads a document and reads it once every job due has run. */
async function ingest(name: string, bytes: Uint8Array): Promise<{ id: number; status: string }> {
  const form = new FormData();
  form.set('name', name);
  form.set('type', 'pdf');
  form.set('file', new Blob([bytes]), `${name}.pdf`);
  const created = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: user.token, raw: form });
  if (created.status !== 201) throw new Error(`upload refused: ${created.status} ${JSON.stringify(created.body)}`);
  await api.platform.runtime.settled();
  const status = (await api.request('GET', `/user/knowledgebases/${kb}/documents/${created.body.data.id}`, { token: user.token })).body.data.status;
  return { id: created.body.data.id, status };
}

t.test('event loop stays responsive during extraction', async (t) => {
  // A small document first, so the worker has loaded its modules: what is measured is the work.
  t.equal((await ingest('warm-up', makePdf([['warm up']]))).status, 'active');
  const form = new FormData();
  form.set('name', 'Big manual');
  form.set('type', 'pdf');
  form.set('file', new Blob([pdf]), 'big.pdf');
  const created = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: user.token, raw: form });
  t.equal(created.status, 201);
  // Measured from the answer on: the test's own encoding of the upload shares this event loop.
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  const utilizationBefore = performance.eventLoopUtilization();
  const cpuBefore = await cpuTimes();
  let status = 'processing';
  let answered = 0;
  // Requests every 20 ms while the extraction runs: the probes whose answers are measured.
  while (status === 'processing') {
    const doc = await api.request('GET', `/user/knowledgebases/${kb}/documents/${created.body.data.id}`, { token: user.token });
    status = doc.body.data.status;
    answered++;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  histogram.disable();
  const utilization = performance.eventLoopUtilization(utilizationBefore).utilization;
  const cpuAfter = await cpuTimes();
  const steal = share('steal', cpuBefore, cpuAfter);
  const idle = share('idle', cpuBefore, cpuAfter);
  t.equal(status, 'active');
  t.comment(`event loop busy ${(utilization * 100).toFixed(0)}% of the time; host CPU idle ${percent(idle)}, stolen ${percent(steal)}`);
  t.ok(utilization < 0.5, `the event loop was busy ${(utilization * 100).toFixed(0)}% of the time, under half`);
  const p99Ms = histogram.percentile(99) / 1e6;
  const maxMs = histogram.max / 1e6;
  t.comment(`event loop delay during ingestion: p99 ${p99Ms.toFixed(1)} ms, max ${maxMs.toFixed(1)} ms over ${answered} polls`);
  // Delay also counts time this process waited for a CPU: taken by the host for other machines
  // (steal) or by other work here (PostgreSQL, the worker, a test file running alongside). With
  // the CPUs saturated the figures say nothing of this code, and the busy share above is the proof
  // that remains; with CPU to spare they are judged. Work done on the event loop itself showed as
  // 770 ms stalls and more before it moved to the pool.
  if (steal === undefined || idle === undefined || (steal < 0.1 && idle > 0.25)) {
    t.ok(p99Ms < 50, `p99 event loop delay ${p99Ms.toFixed(1)} ms is under 50 ms`);
    t.ok(maxMs < 600, `max event loop delay ${maxMs.toFixed(1)} ms is under 600 ms`);
  } else t.comment(`delays not judged: the CPUs were ${percent(idle)} idle and ${percent(steal)} stolen meanwhile`);
  const found = await api.request('POST', `/user/knowledgebases/${kb}/search`, { token: user.token, body: { query: 'invoices 11999' } });
  t.match(found.body.data[0], { source: 'page 300' });
});
