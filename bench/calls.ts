import { fork, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startPlatform } from '../api/platform.js';
import { createLoopbackCarrier, type LoopbackDial } from '../runtime/calls/carriers.js';
import { loadConfig, type Config } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';

/**
 * Concurrent calls: N simulated phones (a separate process, see phones.ts) call through the
 * loopback carrier over the Twilio media-stream protocol; the assistant uses the instant `dev`
 * transcriber, model and voice. Each phone streams 50 frames/s, speaks 1.2 s every 4 s and hears
 * the answer. Per step of N: server CPU per call, RSS per call, p99 event-loop lag, p99 jitter of
 * the agent's frames as the phones receive them, and the added voice-to-voice latency (last
 * caller speech frame to the agent's first audio frame, less the end-of-turn silence of 500 ms
 * and the VAD's 100 ms hangover). Reports the largest N whose p99 jitter stays under 20 ms.
 * Usage: `npm run bench:calls [-- seconds steps...]` (default 10 s; 50 100 200 400 800).
 * NOISE_CANCELLATION=1 turns the assistant's noise suppression on.
 */

export interface CallsStep {
  readonly calls: number;
  readonly cpuPerCallPercent: number;
  readonly rssPerCallKb: number;
  readonly loopLagP99Ms: number;
  readonly jitterP99Ms: number;
  readonly addedLatencyP50Ms: number;
  readonly addedLatencyP99Ms: number;
  readonly turns: number;
}

const END_OF_TURN_MS = 500 + 100;
const percentile = (values: number[], p: number) => {
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

export async function runCallsBench(options: { steps: number[]; seconds: number; noiseCancellation?: boolean; config?: Partial<Config>; onStep?: (step: CallsStep) => void }): Promise<CallsStep[]> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-calls-'));
  const phones = fork(fileURLToPath(new URL('./phones.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const carrier = createLoopbackCarrier((call: LoopbackDial) => phones.send({ dial: call }));
  const adminToken = 'bench-admin-token-0123456789';
  const config = loadConfig(process.env, { port: 0, dataDir, logLevel: 'silent', adminToken, databasePoolSize: 20, rateLimits: { perIp: { capacity: 1e6, perMinute: 1e6 }, perConversation: { capacity: 1e6, perMinute: 1e6 } }, ...options.config });
  const platform = await startPlatform(config, createLogger('silent'), { carrier });
  const origin = platform.origin;
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
    const voice = platform.runtime.services.voice;
    const loop = monitorEventLoopDelay({ resolution: 5 });
    loop.enable();
    for (const n of options.steps) {
      while (voice.liveCount() < n) {
        const placed = await call('POST', '/user/calls', { assistant_id: assistant.data.id, phone_number: '+14155550199' }, user.token);
        if (!placed.data) throw new Error(`could not place a call: ${JSON.stringify(placed)}`);
      }
      const connectBy = performance.now() + 30_000;
      for (;;) {
        const { connected } = await ask<{ connected: number }>(phones, { report: true }, 'connected');
        if (connected >= n || performance.now() > connectBy) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await ask(phones, { report: true }, 'connected');
      loop.reset();
      const rssBefore = process.memoryUsage().rss;
      const cpuBefore = process.cpuUsage();
      const wallBefore = performance.now();
      await new Promise((resolve) => setTimeout(resolve, options.seconds * 1000));
      const cpu = process.cpuUsage(cpuBefore);
      const wall = performance.now() - wallBefore;
      const report = await ask<{ gaps: number[]; voiceToVoice: number[] }>(phones, { report: true }, 'connected');
      const added = report.voiceToVoice.map((ms) => ms - END_OF_TURN_MS);
      steps.push({
        calls: n,
        cpuPerCallPercent: (((cpu.user + cpu.system) / 1000 / wall) * 100) / n,
        rssPerCallKb: (Math.max(process.memoryUsage().rss, rssBefore) / 1024) / n,
        loopLagP99Ms: loop.percentile(99) / 1e6,
        jitterP99Ms: percentile(report.gaps.map((gap) => Math.abs(gap - 20)), 99),
        addedLatencyP50Ms: percentile(added, 50),
        addedLatencyP99Ms: percentile(added, 99),
        turns: report.voiceToVoice.length,
      });
      options.onStep?.(steps.at(-1)!);
      // Past saturation the next step only measures a machine out of breath.
      if (steps.at(-1)!.jitterP99Ms > 50 || steps.at(-1)!.loopLagP99Ms > 100) break;
    }
    loop.disable();
    await ask(phones, { hangUp: true }, 'hungUp');
  } finally {
    phones.disconnect();
    await platform.close();
    await rm(dataDir, { recursive: true, force: true });
  }
  return steps;
}

function formatStep(s: CallsStep): string {
  return `| ${s.calls} | ${s.cpuPerCallPercent.toFixed(2)} | ${s.rssPerCallKb.toFixed(0)} | ${s.loopLagP99Ms.toFixed(1)} | ${s.jitterP99Ms.toFixed(1)} | ${s.addedLatencyP50Ms.toFixed(1)} | ${s.addedLatencyP99Ms.toFixed(1)} | ${s.turns} |`;
}

export function formatCalls(steps: CallsStep[], noiseCancellation: boolean): string {
  const ok = steps.filter((s) => s.jitterP99Ms < 20).map((s) => s.calls);
  return [
    `Concurrent calls (loopback carrier, dev providers, noise suppression ${noiseCancellation ? 'on' : 'off'})`,
    '',
    '| calls | server CPU % of a core per call | RSS KB per call (process RSS / calls) | event-loop lag p99 ms | outbound jitter p99 ms | added voice-to-voice p50 ms | p99 ms | turns measured |',
    '|---|---|---|---|---|---|---|---|',
    ...steps.map(formatStep),
    '',
    `Largest N with p99 jitter under 20 ms: ${ok.length ? Math.max(...ok) : 'none'}`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [seconds = 10, ...steps] = process.argv.slice(2).map(Number);
  const noiseCancellation = process.env.NOISE_CANCELLATION === '1';
  const result = await runCallsBench({ seconds, steps: steps.length ? steps : [50, 100, 200, 400, 800], noiseCancellation, onStep: (step) => console.error(formatStep(step)) });
  console.log(formatCalls(result, noiseCancellation));
}
