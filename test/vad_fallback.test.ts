import t, { type Test } from 'tap';
import { EnergyVad } from '../runtime/voice/hearing/vad/energy.js';
import { startVad } from '../runtime/voice/hearing/vad/start.js';
import { concat, cough, frames, silence, speechClip } from './helpers/vadAudio.js';
import { loggedLines, sileroRig } from './helpers/vadRig.js';

/**
 * A Silero VAD whose worker fails never stalls a call: the call gets the energy VAD's decisions.
 * 1. A worker that exits on its first batch: every call falls back within 200 ms of its first
 *    unanswered window, frame for frame the energy VAD's decisions; the engine logs the failure
 *    once, each call its fallback once, and later windows are refused at once.
 * 2. A worker that throws, and one that never answers (taken for hung after `hungMs`): the same,
 *    each logged for what it was.
 * 3. A model that cannot be loaded: start-up logs it and runs on the energy VAD.
 */

const FAKE_WORKER = new URL('./fakes/vadWorker.mjs', import.meta.url);
const audio = concat(silence(1000), cough(300, 0.5), silence(300), speechClip('confirm-en-f'), silence(1000));

async function failing(t: Test, mode: 'exit' | 'throw' | 'hang') {
  // Only the hanging worker is to be taken for hung: on a loaded machine an exit or a throw may
  // take longer than 100 ms to be heard of, and would then be logged as a hang.
  const rig = sileroRig(t, { workerUrl: FAKE_WORKER, modelPath: mode, hungMs: mode === 'hang' ? 100 : 60_000 });
  await rig.engine.ready;
  const calls = [rig.open(1), rig.open(2)];
  const energy = new EnergyVad();
  let fellBackAt = -1;
  const mismatches: number[] = [];
  for (const [i, frame] of frames(audio).entries()) {
    const expected = energy.process(frame);
    for (const vad of calls) {
      const speaking = vad.process(frame);
      if (vad.fallingBack) {
        if (fellBackAt < 0) fellBackAt = i;
        if (speaking !== expected || vad.loud !== energy.loud) mismatches.push(i);
      }
    }
    await rig.engine.idle();
  }
  return { ...rig, calls, fellBackAt, mismatches };
}

t.test('a worker that exits', async (t) => {
  const { engine, lines, fellBackAt, mismatches } = await failing(t, 'exit');
  t.ok(fellBackAt >= 50 && fellBackAt <= 50 + 12, `the calls fall back at frame ${fellBackAt}, within 200 ms of the cough's first window`);
  t.same(mismatches, [], "while falling back, every decision is the energy VAD's");
  t.equal(lines.filter((l) => /the VAD worker exited/.test(String(l.msg))).length, 1, 'the failure is logged once');
  const fallbacks = lines.filter((l) => /the energy VAD answers for this call/.test(String(l.msg)));
  t.same(fallbacks.map((l) => l.callId).sort(), [1, 2], 'each call logs its fallback once');
  t.notOk(engine.available, 'the engine takes no more windows');
  t.notOk(engine.stream(() => {}).submit(0, new Int16Array(576)), 'a window is refused at once');
});

t.test('a worker that throws', async (t) => {
  const { lines, fellBackAt, mismatches } = await failing(t, 'throw');
  t.ok(fellBackAt >= 50 && fellBackAt <= 62, `fallback at frame ${fellBackAt}`);
  t.same(mismatches, []);
  t.equal(lines.filter((l) => /the VAD worker failed/.test(String(l.msg))).length, 1, 'the error is logged once');
});

t.test('a worker that never answers', async (t) => {
  const { lines, fellBackAt, mismatches } = await failing(t, 'hang');
  t.ok(fellBackAt >= 50 && fellBackAt <= 62, `fallback at frame ${fellBackAt}`);
  t.same(mismatches, []);
  t.equal(lines.filter((l) => /did not answer in time/.test(String(l.msg))).length, 1, 'the hang is logged once');
});

t.test('a model that cannot be loaded', async (t) => {
  const { lines, logger } = loggedLines();
  const vads = await startVad('silero', logger, { modelPath: '/nonexistent/silero_vad.onnx' });
  t.teardown(() => vads.close());
  t.equal(vads.name, 'energy', 'the process runs on the energy VAD');
  t.ok(lines.some((l) => l.msg === 'the Silero VAD could not be started; calls use the energy VAD' && l.level === 50), 'and says why, as an error');
  const vad = vads.open(1);
  t.ok(frames(concat(silence(500), cough(300, 0.5))).some((frame) => vad.process(frame)), 'a cough is speech to it');
});
