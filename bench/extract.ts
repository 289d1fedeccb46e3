import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createWorkerPool } from '../runtime/workers.js';
import { makePdf } from '../test/fixtures/pdf.js';

/**
 * PDF text extraction throughput: a generated PDF (default 200 pages) through the worker pool,
 * against poppler's `pdftotext` on the same file in the same run, with the event-loop lag of this
 * process measured while the pool works. Usage: `npm run bench:extract [-- pages [rounds]]`.
 * `pdftotext` comes from Debian's poppler-utils; without it only the pool is measured.
 */

const pages = Number(process.argv[2] ?? 200);
const rounds = Number(process.argv[3] ?? 3);
const pdf = makePdf(
  Array.from({ length: pages }, (_, p) =>
    Array.from({ length: 45 }, (_, l) => `Page ${p + 1}, line ${l + 1}: invoices, refunds and shipping terms are described here in plain words.`),
  ),
);
const dir = await mkdtemp(join(tmpdir(), 'ap-bench-extract-'));
const file = join(dir, 'bench.pdf');
await writeFile(file, pdf);

const threads = availableParallelism();
const pool = createWorkerPool(threads);
await pool.extractFile({ type: 'pdf', bytes: makePdf([['warm up']]) });

const lag = monitorEventLoopDelay({ resolution: 5 });
lag.enable();
const started = performance.now();
// One file per thread at a time: the pool's throughput, not one thread's.
await Promise.all(Array.from({ length: rounds * threads }, () => pool.extractFile({ type: 'pdf', bytes: new Uint8Array(pdf) })));
const poolSeconds = (performance.now() - started) / 1000;
lag.disable();
const poolRate = (pages * rounds * threads) / poolSeconds;
await pool.close();

let popplerRate: number | undefined;
const probe = spawnSync('pdftotext', ['-v']);
if (probe.error === undefined) {
  const run = promisify(execFile);
  const popplerStarted = performance.now();
  // As many pdftotext processes at once as the pool has threads.
  for (let round = 0; round < rounds; round++) {
    await Promise.all(Array.from({ length: threads }, (_, i) => run('pdftotext', [file, join(dir, `out-${round}-${i}.txt`)])));
  }
  popplerRate = (pages * rounds * threads) / ((performance.now() - popplerStarted) / 1000);
}
await rm(dir, { recursive: true, force: true });

console.log(`PDF extraction, ${pages} pages x ${rounds * threads} files, ${threads} threads`);
console.log('| extractor | pages/s | event-loop lag p99 / max (ms) |');
console.log('|---|---|---|');
console.log(`| worker pool (pdf.js) | ${Math.round(poolRate)} | ${(lag.percentile(99) / 1e6).toFixed(1)} / ${(lag.max / 1e6).toFixed(1)} |`);
if (popplerRate !== undefined) {
  console.log(`| pdftotext (poppler, same concurrency) | ${Math.round(popplerRate)} | - |`);
  console.log(`ratio pool/pdftotext: ${(poolRate / popplerRate).toFixed(2)}`);
} else console.log('pdftotext not found (apt-get install poppler-utils) - baseline skipped');
