import { execFile } from 'node:child_process';
import { appendFile, readFile } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import { promisify } from 'node:util';
import { CALL_STEPS, formatCalls, runCallsBench, workerCounts } from './calls.js';
import { formatListing, runListingBench } from './listing.js';

/**
 * `npm run bench`: every benchmark in one run (REST, concurrent calls, chat, extraction, call
 * listing), each bounded in time and load and on loopback only; the figures are printed and
 * appended to bench/RESULTS.md with the date, the machine and the commit.
 * QUICK=1 runs every part at small sizes (a minute in all). On a virtual machine the share of CPU
 * time the host took for others (steal, from /proc/stat) is given after each part: figures taken
 * under heavy steal are not comparable with quiet ones.
 */

const run = promisify(execFile);
const quick = process.env.QUICK === '1';
const sections: string[] = [];
/** Total and steal jiffies of all CPUs (Linux), or undefined elsewhere. */
const cpuTimes = async () => {
  const line = (await readFile('/proc/stat', 'utf8').catch(() => '')).split('\n')[0] ?? '';
  const fields = line.trim().split(/\s+/).slice(1).map(Number);
  return fields.length >= 8 ? { total: fields.reduce((a, b) => a + b, 0), steal: fields[7]! } : undefined;
};
let partStart = await cpuTimes();
const section = async (text: string) => {
  const now = await cpuTimes();
  const steal = partStart && now && now.total > partStart.total ? ((now.steal - partStart.steal) / (now.total - partStart.total)) * 100 : undefined;
  partStart = now;
  const report = steal === undefined ? text : `${text}\n\nCPU steal during this part: ${steal.toFixed(0)}%`;
  console.log(`${report}\n`);
  sections.push(report);
};

const commit = await run('git', ['rev-parse', '--short', 'HEAD']).then((r) => r.stdout.trim(), () => 'unknown');
const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.versions.node}`;
const tsx = [process.execPath, '--import', 'tsx'] as const;

await section((await run(tsx[0], [...tsx.slice(1), 'bench/rest.ts', ...(quick ? ['2', '1', '1'] : ['10'])], { maxBuffer: 1 << 20 })).stdout.trim());
const callSteps = [];
for (const workers of workerCounts()) callSteps.push(...(await runCallsBench({ seconds: quick ? 3 : 15, workers, steps: quick ? [20, 50] : CALL_STEPS })));
await section(formatCalls(callSteps, false));
// In a process of its own, as its npm script runs it: memory the calls left free would take the sockets.
await section((await run(process.execPath, ['--expose-gc', '--no-memory-reducer', '--import', 'tsx', 'bench/chat.ts', quick ? '3' : '10', quick ? '1000' : '10000'], { maxBuffer: 1 << 20 })).stdout.trim());
await section((await run(tsx[0], [...tsx.slice(1), 'bench/extract.ts', quick ? '20' : '200', quick ? '1' : '3'], { maxBuffer: 1 << 20 })).stdout.trim());
await section(formatListing(await runListingBench(quick ? { calls: 50_000, users: 100, requests: 20 } : { calls: 1_000_000, users: 1_000, requests: 100 })));

const entry = [`## ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${commit}${quick ? ' (QUICK)' : ''}`, '', `Machine: ${machine}.`, '', ...sections.map((s) => `${s}\n`)].join('\n');
await appendFile(new URL('./RESULTS.md', import.meta.url), `\n${entry}`);
console.log('Appended to bench/RESULTS.md');
