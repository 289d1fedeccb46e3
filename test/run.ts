import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { startTestCluster } from './helpers/cluster.js';
import { TapFailures } from './helpers/tapFailures.js';

/**
 * `npm test`: one embedded PostgreSQL for the whole run with a migrated template database, then
 * tap over every test file (each file copies the template into a database of its own).
 * Arguments are passed to tap, so `npm test -- test/auth.test.ts` runs one file.
 */

const require = createRequire(import.meta.url);
const tapBin = join(dirname(require.resolve('tap/package.json')), 'dist/esm/run.mjs');

// A fresh install carries tap's default plugin build, which loads TypeScript through ts-node;
// this project drops that plugin (tsx loads the files), and tap would only notice during the
// first run. Rebuilding up front makes every run, the first included, load files the same way.
const built = join(dirname(require.resolve('@tapjs/test/package.json')), 'test-built/dist/esm/index.js');
if (readFileSync(built, 'utf8').includes('@tapjs/typescript')) {
  const build = spawnSync(process.execPath, [tapBin, 'build'], { stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}

const cluster = await startTestCluster();
let exitCode = 1;
try {
  exitCode = await new Promise<number>((resolveRun) => {
    const child = spawn(process.execPath, [tapBin, ...process.argv.slice(2)], {
      stdio: ['inherit', 'pipe', 'inherit'],
      env: { ...process.env, AP_TEST_PG_ADMIN_URL: cluster.adminUrl },
    });
    // Pass tap's output through and restate its summary (`# { total: N, pass: P, fail: F }`)
    // as the plain closing line CI reads: `P passed, F failed, S skipped`.
    let pending = '';
    let summary: string | undefined;
    const failures = new TapFailures();
    child.stdout.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        failures.line(line);
        if (/^# \{ total: /.test(line)) summary = line;
      }
    });
    child.stdout.on('end', () => {
      const failed = failures.summary();
      if (failed.length > 0) process.stdout.write(`\n# The failures, restated:\n${failed.join('\n')}\n`);
      if (!summary) return;
      const count = (name: string): number => Number(new RegExp(`${name}: (\\d+)`).exec(summary!)?.[1] ?? 0);
      process.stdout.write(`\n${count('pass')} passed, ${count('fail')} failed, ${count('skip') + count('todo')} skipped\n`);
    });
    const forward = (signal: NodeJS.Signals): void => void child.kill(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('exit', (code, signal) => resolveRun(code ?? (signal ? 1 : 0)));
  });
} finally {
  await cluster.stop();
}
process.exit(exitCode);
