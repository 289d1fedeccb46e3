import t from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { Hearing, type HearingHooks } from '../runtime/voice/hearing/hearing.js';
import { energyVads } from '../runtime/voice/hearing/vad/energy.js';
import type { VadSource } from '../runtime/voice/hearing/vad/vad.js';
import type { CallSpec } from '../runtime/voice/spec.js';
import { concat, cough, frames, mix, silence, speechClip, tone, voiced, whiteNoise } from './helpers/vadAudio.js';
import { energyTrace, runInStep, sileroRig, type Trace } from './helpers/vadRig.js';

/**
 * The VAD seam: the energy VAD and Silero on the same audio, each sound after 1 s of silence and
 * followed by 1 s of it (frames of 20 ms; the sound starts at frame 50):
 * 1. Silence: neither speaks, and Silero runs no inference at all (every window is gated).
 * 2. Speech (espeak-ng clips through the phone band, English and German, and a synthetic voiced
 *    sound): both speak; Silero starts within 160 ms of the sound (240 ms for the synthetic one), its last loud frame (where the
 *    end of turn is timed from) is within 100 ms of the energy VAD's, and it lets go within 300 ms.
 * 3. Not speech — a tone, a cough, two coughs, white noise: the energy VAD says speech, Silero
 *    never does.
 * 4. A caller who stops as a noise begins: Silero ends the speech within 300 ms, the energy VAD
 *    hears speech until the noise stops.
 * 5. Through hearing: the VAD the call's spec names decides; a cough starts speech with the energy
 *    VAD and not with Silero, and a sentence starts and stops it once with Silero.
 */

// One engine for the file: onnxruntime's addon loads in one thread per process.
const { vads, engine, open } = sileroRig(t);

const LEAD = 50;
const framed = (sound: Int16Array) => concat(silence(1000), sound, silence(1000));
const end = (sound: Int16Array) => LEAD + frames(sound).length;

t.test('silence: no speech, and no inference', async (t) => {
  await engine.ready;
  const audio = concat(silence(1000), whiteNoise(2000, 0.001));
  const [silero] = await runInStep(engine, [{ vad: open(), audio }]);
  t.equal(silero!.onset, -1, 'Silero hears no speech');
  t.equal(energyTrace(audio).onset, -1, 'the energy VAD hears none');
  t.equal(engine.batches, 0, 'every window was gated: no batch went to the worker');
});

t.test('speech: both VADs hear it, Silero within a window or two of the energy VAD', async (t) => {
  await engine.ready;
  const sounds = { 'booking-en': speechClip('booking-en'), 'confirm-en-f': speechClip('confirm-en-f'), 'termin-de': speechClip('termin-de'), voiced: voiced(1500, 0.3) };
  const traces = await runInStep(engine, Object.values(sounds).map((sound) => ({ vad: open(), audio: framed(sound) })));
  Object.entries(sounds).forEach(([name, sound], i) => {
    const silero = traces[i]!;
    const energy = energyTrace(framed(sound));
    t.ok(energy.onset >= LEAD && energy.onset <= LEAD + 8, `${name}: the energy VAD starts with the sound (frame ${energy.onset})`);
    // The synthetic voice takes Silero a little longer to be sure of.
    const onsetFrames = name === 'voiced' ? 12 : 8;
    t.ok(silero.onset >= LEAD && silero.onset <= LEAD + onsetFrames, `${name}: Silero starts within ${onsetFrames * 20} ms (frame ${silero.onset})`);
    t.ok(Math.abs(silero.lastLoud - energy.lastLoud) <= 5, `${name}: last loud frame ${silero.lastLoud}, energy's ${energy.lastLoud}`);
    t.ok(silero.last <= end(sound) + 15, `${name}: Silero lets go by frame ${silero.last} (sound ends at ${end(sound)})`);
    t.ok(silero.probabilities.some((p) => p > 0.9), `${name}: Silero is sure of it`);
  });
});

t.test('not speech: a tone, coughs and noise are speech only to the energy VAD', async (t) => {
  await engine.ready;
  const sounds = { tone: tone(600, 440, 0.3), cough: cough(300, 0.5), 'two coughs': concat(cough(250, 0.6, 5), silence(150), cough(250, 0.6, 6)), 'white noise': whiteNoise(1500, 0.2) };
  const traces = await runInStep(engine, Object.values(sounds).map((sound) => ({ vad: open(), audio: framed(sound) })));
  Object.entries(sounds).forEach(([name, sound], i) => {
    const energy: Trace = energyTrace(framed(sound));
    t.ok(energy.onset >= LEAD && energy.onset < end(sound), `${name}: the energy VAD takes it for speech (from frame ${energy.onset})`);
    t.equal(traces[i]!.onset, -1, `${name}: Silero does not`);
    t.ok(Math.max(...traces[i]!.probabilities) < 0.35, `${name}: Silero's probability stays under 0.35`);
  });
});

t.test('a caller who stops as a noise begins', async (t) => {
  await engine.ready;
  const speech = speechClip('confirm-en-f');
  const audio = concat(silence(1000), speech, whiteNoise(1500, 0.05, 7), silence(500));
  const [silero] = await runInStep(engine, [{ vad: open(), audio }]);
  const energy = energyTrace(audio);
  const speechEnd = end(speech);
  t.ok(silero!.last <= speechEnd + 15, `Silero ends the speech by frame ${silero!.last} (the words end at ${speechEnd})`);
  t.ok(energy.last >= speechEnd + 60, `the energy VAD hears speech until frame ${energy.last}, in the noise`);
});

t.test('through hearing: the spec names the VAD', async (t) => {
  await engine.ready;
  const run = async (source: VadSource, audio: Int16Array) => {
    const events: string[] = [];
    const hooks = { speechStarted: () => events.push('start'), speechStopped: () => events.push('stop'), agentState: () => 'listening', agentAudible: () => false, realtimeAudio: () => {} } as unknown as HearingHooks;
    const spec = { callId: 7, type: 'inbound', mode: 'multimodal', endpointType: 'vad', endpointSensitivity: 0.5, allowInterruptions: true, interruptSensitivity: 0.3, minInterruptWords: null, noiseCancellation: false, languages: [{ code: 'en', name: 'English', voice: 'v' }], answeredBy: null, vad: source } as unknown as CallSpec;
    const hearing = new Hearing(spec, new ManualClock(0), hooks);
    for (const frame of frames(audio)) {
      hearing.hear(frame);
      await engine.idle();
    }
    hearing.close();
    return events;
  };
  t.same(await run(energyVads, framed(cough(300, 0.5))), ['start', 'stop'], 'energy: a cough is the caller speaking');
  t.same(await run(vads, framed(cough(300, 0.5))), [], 'Silero: a cough is nothing');
  t.same((await run(vads, framed(speechClip('confirm-en-f')))).slice(0, 1), ['start'], 'Silero: a sentence starts speech');
  t.equal((await run(vads, framed(speechClip('confirm-en-f')))).at(-1), 'stop', 'and stops it');
});
