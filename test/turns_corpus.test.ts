/**
 * The turn-taking corpus and its benchmark, small and quick (skipped without espeak-ng and sox,
 * which .ci/run installs):
 * 1. The builder makes labelled phone-band clips: whole 20 ms mu-law frames, the pause where the
 *    label says and as long as asked, speech audible where the label says, a background at its SNR
 *    before the caller speaks; a second load reads the clips instead of building them.
 * 2. The summary counts cut-offs per pause length and endpoint type, false interruptions and
 *    resumptions, and barge-ins cleared early, in time, late and never.
 * 3. `runTurnsBench` plays a few clips over the Twilio protocol and reports every figure.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { formatTurns, runTurnsBench, summarize, type JobOutcome } from '../bench/turns.js';
import { loadCorpus, type Clip } from '../bench/corpus/build.js';
import { corpusPlan } from '../bench/corpus/plan.js';
import { missingCorpusTools } from '../bench/corpus/tools.js';
import { levelDb, mulawDecode } from '../runtime/voice/audio.js';
import { freshDatabase } from './helpers/database.js';

const missing = missingCorpusTools();
const skip = missing ? `speech corpus tests skipped: ${missing}` : false;
const SMALL = ['pause-en0-en-us_m3-150-700', 'backchannel-en-okay-en-us_m3-200', 'interruption-en-wait-stop-i-have-a-question-en-us_m3-170-tv20', 'noise-door-8'];

/** Level (dBFS) of the clip between two times of its timeline. */
const levelBetween = (clip: Clip, startMs: number, endMs: number) => levelDb(mulawDecode(clip.audio.subarray(startMs * 8, endMs * 8)));

t.test('the builder makes labelled clips and reads them once built', { skip }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ap-corpus-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const specs = corpusPlan().filter((spec) => SMALL.includes(spec.id));
  t.equal(specs.length, SMALL.length, 'the plan has the clips');
  const first = await loadCorpus({ dir, clips: specs });
  t.equal(first.built, SMALL.length, 'built');
  const byId = new Map(first.clips.map((clip) => [clip.label.id, clip]));
  for (const clip of first.clips) {
    t.equal(clip.audio.length % 160, 0, `${clip.label.id}: whole 20 ms frames`);
    t.equal(clip.audio.length, clip.label.durationMs * 8, `${clip.label.id}: 8 kHz, one byte a sample`);
  }
  const paused = byId.get(SMALL[0]!)!;
  t.equal(paused.label.kind, 'pause');
  t.equal(paused.label.speech.length, 2, 'two spoken parts');
  const [pause] = paused.label.pauses;
  t.equal(pause!.nominalMs, 700);
  t.ok(Math.abs(pause!.endMs - pause!.startMs - 700) <= 10, `the pause lasts 700 ms (${pause!.endMs - pause!.startMs})`);
  t.ok(levelBetween(paused, pause!.startMs + 50, pause!.endMs - 50) < -60, 'silent in the pause');
  const [a, b] = paused.label.speech;
  t.ok(levelBetween(paused, a!.startMs, a!.endMs) > -30 && levelBetween(paused, b!.startMs, b!.endMs) > -30, 'audible where the label has speech');
  t.match(paused.label.text, /^My order number is … four four one seven/);

  const noisy = byId.get(SMALL[2]!)!;
  t.same(noisy.label.background, { sound: 'tv', snrDb: 20 });
  const speechDb = levelBetween(noisy, noisy.label.speech[0]!.startMs, noisy.label.speech[0]!.endMs);
  const backgroundDb = levelBetween(noisy, 0, noisy.label.speech[0]!.startMs - 100);
  t.ok(backgroundDb > -70, 'the background plays before the caller speaks');
  t.ok(speechDb - backgroundDb > 12 && speechDb - backgroundDb < 28, `speech about 20 dB over the background (${(speechDb - backgroundDb).toFixed(1)} dB)`);

  const door = byId.get('noise-door-8')!;
  t.equal(door.label.speech.length, 0, 'a noise clip has no speech');
  t.equal(door.label.sounds[0]!.sound, 'door');
  t.equal(byId.get(SMALL[1]!)!.label.kind, 'backchannel');

  const again = await loadCorpus({ dir, clips: specs });
  t.equal(again.built, 0, 'read, not built, the second time');
  t.same(again.clips.map((c) => c.label), first.clips.map((c) => c.label));
});

t.test('the summary counts what the calls showed', async (t) => {
  const clip = (kind: string, nominalMs?: number, background: unknown = null) => ({ label: { kind, pauses: nominalMs ? [{ nominalMs }] : [], background } }) as unknown as Clip;
  const outcomes = [
    { clip: clip('pause', 500), role: 'listen-vad', cutOff: true, answerAfterMs: -900, elapsedMs: 5_000 },
    { clip: clip('pause', 500), role: 'listen-vad', cutOff: false, answerAfterMs: 520, elapsedMs: 5_000 },
    { clip: clip('pause', 700), role: 'listen-ai', cutOff: false, answerAfterMs: 1_200, elapsedMs: 5_000 },
    { clip: clip('pause', 700, { sound: 'tv', snrDb: 20 }), role: 'listen-vad', cutOff: false, answerAfterMs: 3_000, elapsedMs: 5_000 },
    { clip: clip('backchannel'), role: 'talk', overAgent: true, cleared: true, clearAfterMs: 500, resumed: true, elapsedMs: 5_000 },
    { clip: clip('backchannel'), role: 'talk', overAgent: true, cleared: false, elapsedMs: 5_000 },
    { clip: clip('backchannel'), role: 'talk', overAgent: false, cleared: false, elapsedMs: 5_000 },
    { clip: clip('noise'), role: 'talk', overAgent: true, cleared: true, clearAfterMs: 80, resumed: false, elapsedMs: 5_000 },
    { clip: clip('interruption'), role: 'talk', overAgent: true, cleared: true, clearAfterMs: 560, elapsedMs: 5_000 },
    { clip: clip('interruption'), role: 'talk', overAgent: true, cleared: true, clearAfterMs: 900, elapsedMs: 5_000 },
    { clip: clip('interruption'), role: 'talk', overAgent: true, cleared: true, clearAfterMs: -300, elapsedMs: 5_000 },
    { clip: clip('interruption'), role: 'talk', overAgent: true, cleared: false, elapsedMs: 5_000 },
  ] as unknown as JobOutcome[];
  const r = summarize('energy', outcomes, 500, undefined, 120);
  t.same(r.pauses.vad[500], { clips: 2, cutOffs: 1 });
  t.same(r.pauses.ai[700], { clips: 1, cutOffs: 0 });
  t.equal(r.answerAfterP50Ms.vad, 520, 'answers that cut off are not timed, nor those of noisy lines');
  t.same(r.noisyPauses.vad, { clips: 1, cutOffs: 0 }, 'lines with a background apart');
  t.equal(r.noisyAnswerAfterP50Ms.vad, 3_000);
  t.same(r.backchannels, { clips: 2, paused: 1, resumed: 1, interrupted: 0 }, 'a pause that resumed is no false interruption; a clip that found the agent silent does not count');
  t.same(r.noise, { clips: 1, paused: 1, resumed: 0, interrupted: 1 });
  t.same(r.bargeIn, { clips: 4, missed: 1, early: 1, p50Ms: 900, p95Ms: 900, late: 2, resumed: 0 });
  t.equal(r.notOverAgent, 1);
  t.equal(r.cpuPerCallPercent, (500 / 60_000) * 100);
  t.equal(r.hearingCpuPerCallPercent, (120 / 60_000) * 100, 'hearing over the same call seconds');
  t.match(formatTurns([r]), /^\| energy \| 50\.0% \(1\/2\) \/ n\/a \/ n\/a \| n\/a \/ 0\.0% \(0\/1\) \/ n\/a \| 520 \/ 1200 \| 0\.0% \(0\/1\) \/ n\/a \| 3000 \/ n\/a \| 0\.0% \(0\/2\) \| 100\.0% \(1\/1\) \| 1 of 2 \| 900 \/ 900 \| 2 of 3 \(1 never, 0 resumed over\) \| 1 \| 0\.83 \| 0\.200 \|$/m);
});

t.test('the benchmark plays clips over the Twilio protocol and reports', { skip }, async (t) => {
  const results = await runTurnsBench({ vads: ['energy'], corpusDir: join(tmpdir(), 'turns-corpus'), select: (spec) => SMALL.includes(spec.id), concurrency: 4, config: { databaseUrl: await freshDatabase() } });
  t.equal(results.length, 1);
  const [r] = results;
  t.equal(r!.pauses.vad[700]!.clips, 1, 'the pause clip played to the vad endpoint');
  t.equal(r!.pauses.ai[700]!.clips, 1, 'and to the ai endpoint');
  t.equal(r!.backchannels.clips + r!.noise.clips + r!.bargeIn.clips + r!.notOverAgent, 3, 'the other clips played over the agent');
  t.equal(r!.bargeIn.missed, 0, 'the interruption was cleared');
  t.ok(r!.cpuPerCallPercent > 0 && r!.callSeconds > 10, 'CPU per call measured');
  t.ok(r!.hearingCpuPerCallPercent > 0 && r!.hearingCpuPerCallPercent < r!.cpuPerCallPercent, 'hearing measured apart, a share of the whole');
  t.match(formatTurns(results), /^\| energy \| /m);
});
