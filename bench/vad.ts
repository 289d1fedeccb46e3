import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { FRAME_MS } from '../runtime/voice/audio.js';
import { createLogger } from '../runtime/logger.js';
import { energyVads } from '../runtime/voice/hearing/vad/energy.js';
import { sileroVads, type SileroVad } from '../runtime/voice/hearing/vad/silero.js';
import type { Vad } from '../runtime/voice/hearing/vad/vad.js';
import { INPUT_SAMPLES } from '../workers/vadProtocol.js';
import { concat, frames, mix, silence, speechClip, whiteNoise } from '../test/helpers/vadAudio.js';

/**
 * The Silero VAD's cost here: one worker thread, one intra-op thread, 16 kHz windows of 512
 * samples (32 ms).
 * 1. Inference per window, the worker's own time: one window at a time, and batches of 1, 100 and
 *    400 streams' windows (one inference each).
 * 2. N calls live in real time (a 20 ms frame for each every 20 ms, the main thread doing what
 *    hearing does), with speech about half of the time on a faintly noisy line: the main thread's
 *    event-loop delay p50/p99/max, the worker's share of a core, the windows gated (no inference),
 *    the mean batch, and the frames answered by the energy fallback (answers later than 200 ms).
 *    The same with the energy VAD alone, for the baseline.
 * Usage: `npm run bench:vad [-- seconds streams...]` (default 10 s; 400).
 */

const seconds = Number(process.argv[2] ?? 10);
const liveCounts = process.argv.slice(3).map(Number);
if (liveCounts.length === 0) liveCounts.push(400);
const logger = createLogger('warn');

/** A call's audio: the three clips with pauses, on a faint noise, looped; each call starts elsewhere in it. */
const loop = (() => {
  const speech = concat(speechClip('booking-en'), silence(1500), speechClip('confirm-en-f'), silence(2500), speechClip('termin-de'), silence(2000));
  return frames(mix(speech, whiteNoise(4000, 0.002, 3)));
})();

const silero = sileroVads({ logger });
await silero.engine.ready;
const engine = silero.engine;

async function inference(streams: number, rounds: number): Promise<{ perBatchMs: number; perWindowUs: number }> {
  const window = new Int16Array(INPUT_SAMPLES);
  window.set(loop.slice(100, 102).flatMap((f) => [...f]).slice(0, INPUT_SAMPLES));
  const handles = Array.from({ length: streams }, () => engine.stream(() => {}));
  // One warm-up round.
  for (let round = -1; round < rounds; round++) {
    if (round === 0) Object.assign(engine, { inferMs: 0, batches: 0, windows: 0 });
    handles.forEach((h) => h.submit(round + 1, window));
    await engine.idle();
  }
  const result = { perBatchMs: engine.inferMs / engine.batches, perWindowUs: (engine.inferMs * 1000) / engine.windows };
  handles.forEach((h) => h.close());
  await engine.idle();
  return result;
}

async function live(count: number, open: () => Vad): Promise<Record<string, number>> {
  const vads = Array.from({ length: count }, open);
  const offsets = vads.map((_, i) => Math.floor((i * loop.length) / count));
  const delay = monitorEventLoopDelay({ resolution: 5 });
  const before = { ...engine, cpu: process.cpuUsage() };
  const start = { batches: engine.batches, windows: engine.windows, inferMs: engine.inferMs };
  let fallbackFrames = 0;
  let frame = 0;
  const total = Math.round((seconds * 1000) / FRAME_MS);
  const startedAt = performance.now();
  delay.enable();
  await new Promise<void>((resolveRun) => {
    const tick = () => {
      // Frames due by now (a late timer catches up, as sockets deliver what queued).
      const due = Math.min(total, Math.floor((performance.now() - startedAt) / FRAME_MS) + 1);
      for (; frame < due; frame++) {
        vads.forEach((vad, i) => {
          vad.process(loop[(offsets[i]! + frame) % loop.length]!);
          if ((vad as SileroVad).fallingBack) fallbackFrames++;
        });
      }
      if (frame >= total) return resolveRun();
      setTimeout(tick, Math.max(0, startedAt + frame * FRAME_MS - performance.now()));
    };
    tick();
  });
  delay.disable();
  await engine.idle();
  const elapsed = (performance.now() - startedAt) / 1000;
  const cpu = process.cpuUsage(before.cpu);
  vads.forEach((vad) => vad.close());
  const windowsCut = Math.floor((total * 320) / 512) * count;
  const windows = engine.windows - start.windows;
  return {
    calls: count,
    loopP50Ms: delay.percentile(50) / 1e6,
    loopP99Ms: delay.percentile(99) / 1e6,
    loopMaxMs: delay.max / 1e6,
    processCpuPercent: ((cpu.user + cpu.system) / 1e6 / elapsed) * 100,
    workerCorePercent: ((engine.inferMs - start.inferMs) / 1000 / elapsed) * 100,
    gatedPercent: windowsCut ? (1 - windows / windowsCut) * 100 : 0,
    meanBatch: engine.batches > start.batches ? windows / (engine.batches - start.batches) : 0,
    fallbackFramePercent: (fallbackFrames / (total * count)) * 100,
  };
}

const rows: string[] = [];
const alone = { perWindowUs: 0 };
{
  // One stream, one window at a time: the cost of a window without batching.
  const handle = engine.stream(() => {});
  const window = new Int16Array(INPUT_SAMPLES).fill(1000);
  Object.assign(engine, { inferMs: 0, batches: 0, windows: 0 });
  for (let i = 0; i < 300; i++) {
    handle.submit(i, window);
    await engine.idle();
  }
  alone.perWindowUs = (engine.inferMs * 1000) / engine.windows;
  handle.close();
}
rows.push('Silero v5 inference (worker thread, 1 intra-op thread), 16 kHz window of 512 samples (32 ms)', '', '| batch | ms per batch | µs per window |', '|---|---|---|');
rows.push(`| 1 (one at a time, 300 windows) | ${(alone.perWindowUs / 1000).toFixed(3)} | ${alone.perWindowUs.toFixed(0)} |`);
for (const streams of [1, 100, 400]) {
  const r = await inference(streams, streams === 1 ? 300 : 30);
  rows.push(`| ${streams} | ${r.perBatchMs.toFixed(2)} | ${r.perWindowUs.toFixed(0)} |`);
}
rows.push('', `Live calls in real time for ${seconds} s (speech about half the time, faint line noise)`, '', '| VAD | calls | loop delay p50 / p99 / max ms | process CPU % of a core | worker % of a core | windows gated % | mean batch | frames on energy fallback % |', '|---|---|---|---|---|---|---|---|');
for (const count of liveCounts) {
  for (const [name, open] of [['energy', () => energyVads.open(0)], ['silero', () => silero.open(0)]] as const) {
    const r = await live(count, open);
    const worker = name === 'silero';
    rows.push(`| ${name} | ${count} | ${r.loopP50Ms!.toFixed(1)} / ${r.loopP99Ms!.toFixed(1)} / ${r.loopMaxMs!.toFixed(1)} | ${r.processCpuPercent!.toFixed(0)} | ${worker ? r.workerCorePercent!.toFixed(0) : '-'} | ${worker ? r.gatedPercent!.toFixed(0) : '-'} | ${worker ? r.meanBatch!.toFixed(1) : '-'} | ${worker ? r.fallbackFramePercent!.toFixed(2) : '-'} |`);
  }
}
await silero.close();
console.log(rows.join('\n'));
