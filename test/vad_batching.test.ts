import t from 'tap';
import { INPUT_SAMPLES } from '../workers/vadProtocol.js';
import { concat, frames, mix, silence, speechClip, voiced, whiteNoise } from './helpers/vadAudio.js';
import { runInStep, sileroRig, type Trace } from './helpers/vadRig.js';

/**
 * Batching in the Silero worker: many calls' windows go in one inference, and that changes no
 * call's answers.
 * 1. Twelve calls with different audio, in step (their windows batched together), get the same
 *    probability on every frame as each call run alone, in fewer batches than windows.
 * 2. Two windows of one stream in the same batch run in order (one round each), as if sent one
 *    at a time; the other stream's window is unaffected.
 * 3. A closed stream gets no answer for a window already queued, and the engine refuses its
 *    windows; a closed engine refuses every window.
 */

// One engine for the file: onnxruntime's addon loads in one thread per process.
const { engine, open } = sileroRig(t);

function calls(): Int16Array[] {
  const clips = [speechClip('booking-en'), speechClip('confirm-en-f'), speechClip('termin-de'), voiced(1500, 0.3)];
  return Array.from({ length: 12 }, (_, i) => {
    const clip = clips[i % clips.length]!;
    // Different offsets and noise, so no two streams see the same windows.
    const audio = concat(silence(200 + 37 * i), clip, silence(600));
    return i % 3 === 0 ? audio : mix(audio, whiteNoise(1000, 0.002 * (i % 3), 100 + i));
  });
}

t.test('many calls in one batch answer as each alone', async (t) => {
  await engine.ready;
  const audios = calls();
  const before = engine.batches;
  const together = await runInStep(engine, audios.map((audio) => ({ vad: open(), audio })));
  const batchesTogether = engine.batches - before;
  const alone: Trace[] = [];
  for (const audio of audios) alone.push((await runInStep(engine, [{ vad: open(), audio }]))[0]!);
  const batchesAlone = engine.batches - before - batchesTogether;
  audios.forEach((_, i) => {
    const a = together[i]!.probabilities;
    const b = alone[i]!.probabilities;
    t.equal(a.length, b.length);
    const worst = Math.max(...a.map((p, k) => Math.abs(p - b[k]!)));
    t.ok(worst < 1e-4, `call ${i}: the largest difference is ${worst}`);
    t.equal(together[i]!.marks, alone[i]!.marks, `call ${i}: the same decisions`);
  });
  t.ok(batchesTogether * 5 < batchesAlone, `together: ${batchesTogether} batches, alone: ${batchesAlone}`);
});

t.test('two windows of one stream in one batch run in order', async (t) => {
  await engine.ready;
  const audio = speechClip('booking-en');
  const window = (k: number) => audio.slice(8_000 + k * 512 - 64, 8_000 + (k + 1) * 512);
  t.equal(window(0).length, INPUT_SAMPLES);
  const answers = (into: Array<[number, number]>) => (seq: number, p: number) => into.push([seq, p]);
  const oneByOne: Array<[number, number]> = [];
  const single = engine.stream(answers(oneByOne));
  for (let k = 0; k < 3; k++) {
    single.submit(k, window(k));
    await engine.idle();
  }
  single.close();
  const batched: Array<[number, number]> = [];
  const other: Array<[number, number]> = [];
  const a = engine.stream(answers(batched));
  const b = engine.stream(answers(other));
  // Queued in the same tick: one batch, three rounds for `a`.
  a.submit(0, window(0));
  b.submit(0, window(2));
  a.submit(1, window(1));
  a.submit(2, window(2));
  await engine.idle();
  t.same(batched.map(([seq]) => seq), [0, 1, 2], 'answers come in window order');
  batched.forEach(([, p], k) => t.ok(Math.abs(p - oneByOne[k]![1]) < 1e-4, `window ${k}: ${p} against ${oneByOne[k]![1]} alone`));
  t.ok(Math.abs(other[0]![1] - (await firstAnswer(window(2)))) < 1e-4, "the other stream's window is its own");
  a.close();
  b.close();
});

/** A fresh stream's answer to one window. */
async function firstAnswer(input: Int16Array): Promise<number> {
  let answer = NaN;
  const stream = engine.stream((_, p) => (answer = p));
  stream.submit(0, input);
  await engine.idle();
  stream.close();
  return answer;
}

t.test('closing', async (t) => {
  await engine.ready;
  const answered: number[] = [];
  const stream = engine.stream((seq) => answered.push(seq));
  const loud = speechClip('booking-en').slice(8_000, 8_000 + INPUT_SAMPLES);
  t.ok(stream.submit(0, loud), 'an open stream is taken');
  stream.close();
  await engine.idle();
  t.same(answered, [], 'no answer reaches a closed stream');
  t.notOk(stream.submit(1, loud), 'a closed stream is refused');
  const vad = open();
  for (const frame of frames(concat(silence(200), speechClip('confirm-en-f')))) vad.process(frame);
  vad.close();
  vad.close();
  await engine.idle();
  t.pass('closing a VAD twice is harmless');
});
