import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startSupervisor } from '../api/supervisor.js';
import type { LoopbackDial } from '../runtime/calls/carriers/loopback.js';
import { loadConfig } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';
import { getFresh } from '../test/helpers/server_process.js';

/**
 * Concurrent calls: N simulated phones (a separate process, see phones.ts) call through the
 * loopback carrier over the Twilio media-stream protocol, into the server run as `npm start` runs
 * it with WORKERS=1 and then WORKERS=2 (BENCH_WORKERS=1,2,4 for others), rows side by side; the assistant uses the instant `dev`
 * transcriber, model and voice. Each phone streams 50 frames/s, speaks 1.2 s every 4 s and hears
 * the answer. Per step of N: server CPU per call (every server process's, from /proc), the phones' own CPU (they share the machine), RSS per call, p99 event-loop lag, p99 jitter of
 * the agent's frames as the phones receive them and as the server sends them (lateness against
 * the 20 ms schedule, from the server's `call_audio_frame_lateness_seconds`), and the added
 * voice-to-voice latency: from the server's `voice_to_voice_added_seconds` (last caller speech
 * frame to the agent's first audio frame, less the end-of-turn silence) and as the phones hear it
 * (less the 500 ms of end-of-turn silence, which counts from the last loud frame; the phones'
 * clock runs in another busy process, so this one reads a few ms either way). Percentiles of the server's
 * histograms are interpolated within buckets, as Prometheus' histogram_quantile does. RSS per call
 * is given twice: the server processes' resident size over the calls, and what it grew by since before the
 * first call, over the calls. N steps up until the p99 jitter of the outbound frames reaches 20 ms,
 * as the phones hear it or as the server sends it (that step is the last); the report names the
 * largest N before it.
 * Usage: `npm run bench:calls [-- seconds steps...]` (default 15 s; 50 100 200 400 800 1200 1600
 * 2400 3200).
 * NOISE_CANCELLATION=1 turns the assistant's noise suppression on.
 */

/** The default steps of N. */
export const CALL_STEPS = [50, 100, 200, 400, 800, 1_200, 1_600, 2_400, 3_200];
/** The p99 outbound jitter (ms) a step must stay under, at the phones and at the server. */
export const JITTER_BOUND_MS = 20;

/** Whether the outbound frames of a step kept to the bound at both ends. */
export function withinBound(step: Pick<CallsStep, 'jitterP99Ms' | 'latenessP99Ms'>): boolean {
  return step.jitterP99Ms < JITTER_BOUND_MS && step.latenessP99Ms < JITTER_BOUND_MS;
}

export interface CallsStep {
  readonly calls: number;
  /** Server processes (WORKERS) sharing the calls. */
  readonly workers: number;
  /** The server processes' CPU over the step, summed, per call. */
  readonly cpuPerCallPercent: number;
  /** The phones' own process (on the same machine): % of a core, all calls together. */
  readonly phonesCpuPercent: number;
  readonly rssPerCallKb: number;
  /** What the processes' resident size grew by since before the first call, per call. */
  readonly addedRssPerCallKb: number;
  /** The worst server process's. */
  readonly loopLagP99Ms: number;
  readonly jitterP99Ms: number;
  readonly latenessP99Ms: number;
  readonly addedLatencyP50Ms: number;
  readonly addedLatencyP99Ms: number;
  readonly phoneAddedLatencyP50Ms: number;
  readonly phoneAddedLatencyP99Ms: number;
  readonly turns: number;
  /** The host's 1-minute load average at the step's end (the machine may be shared). */
  readonly hostLoad: number;
}

type Buckets = Map<number, number>;

/** The cumulative buckets (upper bound in ms → count) of one histogram in a Prometheus exposition, summed over its other labels (the server processes). */
function histogram(exposition: string, name: string): Buckets {
  const buckets: Buckets = new Map();
  for (const match of exposition.matchAll(new RegExp(`^${name}_bucket\\{(?:[^}]*,)?le="([^"]+)"[^}]*\\} (\\d+)$`, 'gm'))) {
    const bound = match[1] === '+Inf' ? Infinity : Number(match[1]) * 1000;
    buckets.set(bound, (buckets.get(bound) ?? 0) + Number(match[2]));
  }
  return buckets;
}

/** The q-quantile (ms) of what was observed between two readings, interpolated within its bucket. */
export function histogramQuantile(before: Buckets, after: Buckets, q: number): number {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((bound) => after.get(bound)! - (before.get(bound) ?? 0));
  const total = counts.at(-1) ?? 0;
  if (total === 0) return Number.NaN;
  const rank = q * total;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i]! < rank) continue;
    const lower = i === 0 ? 0 : bounds[i - 1]!;
    if (bounds[i] === Infinity) return lower;
    const below = i === 0 ? 0 : counts[i - 1]!;
    return lower + ((bounds[i]! - lower) * (rank - below)) / Math.max(1, counts[i]! - below);
  }
  return bounds.at(-2) ?? Number.NaN;
}

const END_OF_TURN_MS = 500;
/** The value at or below which `p` % of `values` lie (NaN for none). */
export const percentile = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

function ask<T>(child: ChildProcess, message: unknown, key: string): Promise<T> {
  return new Promise((resolve) => {
    const listener = (reply: Record<string, unknown>) => {
      if (key in reply) {
        child.off('message', listener);
        resolve(reply as T);
      }
    };
    child.on('message', listener);
    child.send(message as never);
  });
}

/** CPU time (ms) a process has used so far, from /proc (Linux). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
const CLOCK_TICKS = 100;

/** A process's resident size in bytes, from /proc (Linux). */
function rssBytes(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
}

/** One scrape of /metrics from each of `workers` server processes (asked until each has answered), by their `worker` label. */
async function scrapeEach(origin: string, workers: number): Promise<string[]> {
  const byWorker = new Map<number, string>();
  for (let i = 0; byWorker.size < workers; i++) {
    if (i > 200) throw new Error(`only ${byWorker.size} of ${workers} server processes answered /metrics`);
    const text = await getFresh(`${origin}/metrics`);
    const worker = Number(/^process_cpu_user_seconds_total\{worker="(\d+)"\}/m.exec(text)?.[1] ?? 0);
    if (!byWorker.has(worker)) byWorker.set(worker, text);
  }
  return [...byWorker.values()];
}

/**
 * The ladder of steps against `workers` server processes on one port, run as `npm start` runs
 * them (the supervisor of api/supervisor.ts, its embedded PostgreSQL unless `env` names a
 * DATABASE_URL), each process's loopback carrier handing its calls to the phones' process.
 */
export async function runCallsBench(options: { steps: number[]; seconds: number; workers?: number; noiseCancellation?: boolean; env?: Readonly<Record<string, string>>; onStep?: (step: CallsStep) => void }): Promise<CallsStep[]> {
  const workers = options.workers ?? 1;
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-calls-'));
  const phones = fork(fileURLToPath(new URL('./phones.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const adminToken = 'bench-admin-token-0123456789';
  // The dev voice is the tone unless DEV_VOICE=espeak asks for speech, so runs compare with earlier ones.
  const env = { ...process.env, PORT: '0', DATA_DIR: dataDir, DATABASE_URL: '', LOG_LEVEL: 'silent', ADMIN_TOKEN: adminToken, DATABASE_POOL_SIZE: '20', DEV_VOICE: process.env.DEV_VOICE === 'espeak' ? 'espeak' : 'tone', WORKERS: String(workers), ...options.env };
  const config = loadConfig(env);
  const supervisor = await startSupervisor(config, createLogger('silent'), {
    module: fileURLToPath(new URL('./calls_server.ts', import.meta.url)),
    env,
    onMessage: (_index, message) => {
      const { dial } = message as { dial?: LoopbackDial };
      if (dial) phones.send({ dial });
    },
  });
  const origin = `http://127.0.0.1:${supervisor.port}`;
  const pids = supervisor.pids() as number[];
  const call = async (method: string, path: string, body?: unknown, token?: string) => {
    const response = await fetch(`${origin}/api${path}`, { method, headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
    return (await response.json()) as any;
  };
  const steps: CallsStep[] = [];
  try {
    const user = await call('POST', '/auth/register', { name: 'Bench', email: `bench-${Date.now()}@example.com`, password: 'bench password' });
    await call('POST', `/admin/users/${user.user.id}/balance`, { amount: 1_000_000, reason: 'bench' }, adminToken);
    const offers = await call('GET', '/user/phone-numbers/search?country_code=US', undefined, user.token);
    await call('POST', '/user/phone-numbers/purchase', { phone_number: offers.data[0].phone_number }, user.token);
    const numbers = await call('GET', '/user/phone-numbers/all', undefined, user.token);
    const assistant = await call(
      'POST',
      '/user/assistant',
      {
        name: 'Bench', voice_id: 30, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hello.', system_prompt: 'Help',
        llm_model_id: 6, transcriber_provider_id: 14, synthesizer_provider_id: 4, phone_number_id: numbers.data[0].id, max_duration: 1200, max_silence_duration: 360,
        enable_noise_cancellation: options.noiseCancellation ?? false,
      },
      user.token,
    );
    const serverRss = () => pids.reduce((sum, pid) => sum + rssBytes(pid), 0);
    const serverCpu = () => pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
    const rssWithoutCalls = serverRss();
    let placed = 0;
    for (const n of options.steps) {
      for (; placed < n; placed++) {
        const answer = await call('POST', '/user/calls', { assistant_id: assistant.data.id, phone_number: '+14155550199' }, user.token);
        if (!answer.data) throw new Error(`could not place a call: ${JSON.stringify(answer)}`);
      }
      const connectBy = performance.now() + 60_000;
      for (;;) {
        const { connected } = await ask<{ connected: number }>(phones, { report: true }, 'connected');
        if (connected >= n || performance.now() > connectBy) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await ask(phones, { report: true }, 'connected');
      // Each scrape also starts the process's event-loop lag over again (prom-client resets it).
      const metricsBefore = (await scrapeEach(origin, workers)).join('\n');
      const rssBefore = serverRss();
      const cpuBefore = serverCpu();
      const phonesCpuBefore = cpuMs(phones.pid!);
      const wallBefore = performance.now();
      await new Promise((resolve) => setTimeout(resolve, options.seconds * 1000));
      const cpu = serverCpu() - cpuBefore;
      const phonesCpu = cpuMs(phones.pid!) - phonesCpuBefore;
      const wall = performance.now() - wallBefore;
      const rss = Math.max(serverRss(), rssBefore);
      const report = await ask<{ gaps: number[]; voiceToVoice: number[] }>(phones, { report: true }, 'connected');
      const metricsAfter = (await scrapeEach(origin, workers)).join('\n');
      const server = (name: string, q: number) => histogramQuantile(histogram(metricsBefore, name), histogram(metricsAfter, name), q);
      const lags = [...metricsAfter.matchAll(/^nodejs_eventloop_lag_p99_seconds(?:\{[^}]*\})? ([\d.e+-]+)$/gm)].map((match) => Number(match[1]) * 1000);
      const added = report.voiceToVoice.map((ms) => ms - END_OF_TURN_MS);
      steps.push({
        calls: n,
        workers,
        cpuPerCallPercent: ((cpu / wall) * 100) / n,
        phonesCpuPercent: (phonesCpu / wall) * 100,
        rssPerCallKb: rss / 1024 / n,
        addedRssPerCallKb: (rss - rssWithoutCalls) / 1024 / n,
        loopLagP99Ms: Math.max(...lags),
        jitterP99Ms: percentile(report.gaps.map((gap) => Math.abs(gap - 20)), 99),
        latenessP99Ms: server('call_audio_frame_lateness_seconds', 0.99),
        addedLatencyP50Ms: server('voice_to_voice_added_seconds', 0.5),
        addedLatencyP99Ms: server('voice_to_voice_added_seconds', 0.99),
        phoneAddedLatencyP50Ms: percentile(added, 50),
        phoneAddedLatencyP99Ms: percentile(added, 99),
        turns: report.voiceToVoice.length,
        hostLoad: loadavg()[0]!,
      });
      options.onStep?.(steps.at(-1)!);
      // Past the bound the next step would only measure a machine out of breath.
      if (!withinBound(steps.at(-1)!)) break;
    }
    await ask(phones, { hangUp: true }, 'hungUp');
  } finally {
    phones.disconnect();
    supervisor.signal('SIGTERM');
    await supervisor.stopped;
    await rm(dataDir, { recursive: true, force: true });
  }
  return steps;
}

/** The largest N whose jitter stayed under the bound, with every smaller step under it too. */
export function largestWithinBound(steps: readonly CallsStep[]): number | undefined {
  const over = steps.findIndex((s) => !withinBound(s));
  return (over === -1 ? steps : steps.slice(0, over)).at(-1)?.calls;
}

export function formatStep(s: CallsStep): string {
  return `| ${s.calls} | ${s.workers} | ${s.cpuPerCallPercent.toFixed(2)} | ${s.phonesCpuPercent.toFixed(0)} | ${s.rssPerCallKb.toFixed(0)} / ${s.addedRssPerCallKb.toFixed(0)} | ${s.loopLagP99Ms.toFixed(1)} | ${s.jitterP99Ms.toFixed(2)} | ${s.latenessP99Ms.toFixed(2)} | ${s.addedLatencyP50Ms.toFixed(1)} | ${s.addedLatencyP99Ms.toFixed(1)} | ${s.phoneAddedLatencyP50Ms.toFixed(1)} / ${s.phoneAddedLatencyP99Ms.toFixed(1)} | ${s.turns} | ${s.hostLoad.toFixed(1)} |`;
}

/** The rows of every run side by side, step by step; the largest N within the bound per number of server processes. */
export function formatCalls(steps: readonly CallsStep[], noiseCancellation: boolean): string {
  const runs = [...new Set(steps.map((s) => s.workers))];
  const largest = runs.map((workers) => {
    const own = steps.filter((s) => s.workers === workers);
    const n = largestWithinBound(own);
    return `WORKERS=${workers}: ${n ?? 'none'}${n !== undefined && !own.some((s) => !withinBound(s)) ? ' (the largest step tried)' : ''}`;
  });
  return [
    `Concurrent calls (loopback carrier, dev providers, noise suppression ${noiseCancellation ? 'on' : 'off'})`,
    '',
    '| calls | server processes | server CPU % of a core per call | phones\' process CPU % of a core | RSS KB per call: processes / added by the calls | event-loop lag p99 ms (worst process) | outbound jitter at the phones p99 ms | frame lateness at the server p99 ms | added voice-to-voice p50 ms | p99 ms | as the phones hear it p50 / p99 ms | turns measured | host load (1 min) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...[...steps].sort((a, b) => a.calls - b.calls || a.workers - b.workers).map(formatStep),
    '',
    `Largest N with p99 jitter under ${JITTER_BOUND_MS} ms at the phones and at the server: ${largest.join('; ')}`,
  ].join('\n');
}

/** The numbers of server processes a run compares (BENCH_WORKERS, comma-separated). @defaultValue 1 and 2 */
export function workerCounts(value = process.env.BENCH_WORKERS): number[] {
  return (value ?? '1,2').split(',').map(Number);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [seconds = 15, ...steps] = process.argv.slice(2).map(Number);
  const noiseCancellation = process.env.NOISE_CANCELLATION === '1';
  const all: CallsStep[] = [];
  for (const workers of workerCounts()) {
    all.push(...(await runCallsBench({ seconds, workers, steps: steps.length ? steps : CALL_STEPS, noiseCancellation, onStep: (step) => console.error(formatStep(step)) })));
  }
  console.log(formatCalls(all, noiseCancellation));
}
