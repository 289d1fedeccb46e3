import { performance } from 'node:perf_hooks';
import { FRAME_MS } from '../runtime/voice/audio.js';
import { NoiseSuppressor } from '../runtime/voice/hearing/denoise.js';
import { ReferenceNoiseSuppressor } from '../test/helpers/denoiseReference.js';
import { concat, frames, mix, silence, speechClip, whiteNoise } from '../test/helpers/vadAudio.js';

/**
 * The noise suppressor's cost per 20 ms frame on the event loop, side by side with the reference
 * (each hop with its own forward and inverse FFT) on the same audio: the three speech clips with
 * pauses over white noise. Rounds alternate between the two; the median round counts. Also prints
 * how many output samples differ between them and by how much (rounding only: at most 1 LSB).
 * Usage: `npm run bench:denoise [-- rounds]` (default 15).
 */

const rounds = Number(process.argv[2] ?? 15);
const input = frames(mix(concat(speechClip('booking-en'), silence(1500), speechClip('confirm-en-f'), silence(1000), speechClip('termin-de')), whiteNoise(3000, 0.01, 3)));

interface Suppressor {
  process(frame: Int16Array): Int16Array;
}

function run(open: () => Suppressor): { outputs: Int16Array[]; usPerFrame: number } {
  const suppressor = open();
  const outputs: Int16Array[] = [];
  const startedAt = performance.now();
  for (const frame of input) outputs.push(suppressor.process(frame));
  return { outputs, usPerFrame: ((performance.now() - startedAt) * 1000) / input.length };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const reference = run(() => new ReferenceNoiseSuppressor());
const current = run(() => new NoiseSuppressor());
let differing = 0;
let maxDifference = 0;
reference.outputs.forEach((frame, f) => {
  frame.forEach((value, i) => {
    const difference = Math.abs(value - current.outputs[f]![i]!);
    if (difference > 0) differing++;
    maxDifference = Math.max(maxDifference, difference);
  });
});

const times = { reference: [] as number[], current: [] as number[] };
for (let round = 0; round < rounds; round++) {
  times.reference.push(run(() => new ReferenceNoiseSuppressor()).usPerFrame);
  times.current.push(run(() => new NoiseSuppressor()).usPerFrame);
}
const core = (us: number) => ((us / 1000 / FRAME_MS) * 100).toFixed(2);
const before = median(times.reference);
const after = median(times.current);
console.log(
  [
    `Noise suppressor, ${input.length} frames (${((input.length * FRAME_MS) / 1000).toFixed(1)} s of speech and pauses over white noise), median of ${rounds} rounds`,
    '',
    '| implementation | µs per 20 ms frame | % of a core per call |',
    '|---|---|---|',
    `| per hop (reference) | ${before.toFixed(1)} | ${core(before)} |`,
    `| hops sharing FFTs | ${after.toFixed(1)} | ${core(after)} |`,
    '',
    `${(before / after).toFixed(2)}x cheaper; ${differing} of ${input.length * input[0]!.length} samples differ, by at most ${maxDifference} LSB`,
  ].join('\n'),
);
