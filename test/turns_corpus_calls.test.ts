/**
 * Turn-taking heard by callers, end to end over the Twilio media-stream protocol with clips of the
 * speech corpus (espeak-ng voices through the phone band), on the platform's manual clock, with
 * the dev transcriber (no words: the hearing decides on sound alone) and default settings.
 * Skipped without espeak-ng and sox (.ci/run installs them).
 * 1. Backchannels ("okay", "mm-hmm", "genau", "ja, genau") said over the greeting do not stop it:
 *    the agent may pause, then goes on, and the greeting is said whole.
 * 2. A cough or a door slam over the greeting does not stop it either.
 * 3. With `endpoint_type: ai`, a 700 ms pause in the middle of a sentence does not end the turn.
 * 4. A real interruption is cleared within `interrupt_sensitivity` + 150 ms of the caller's first
 *    sound; also one with short pauses in it, "wait, stop, I have a question".
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { loadCorpus, type Clip } from '../bench/corpus/build.js';
import { CorpusCaller, clipFrames, lockstep, overAgentScript, pauseScript, type OverAgentOutcome, type PauseOutcome, type Script } from '../bench/corpus/caller.js';
import { corpusPlan } from '../bench/corpus/plan.js';
import { missingCorpusTools } from '../bench/corpus/tools.js';
import { BARGE_IN_SLACK_MS, LONG_GREETING, dialIn, hangUpAndRead, inboundAssistant, type TurnsPlatform } from '../bench/turns.js';
import { voiceSetup } from './helpers/voice.js';

const missing = missingCorpusTools();
if (missing) t.plan(0, `speech corpus tests skipped: ${missing}`);
else await main();

async function main(): Promise<void> {
  const BACKCHANNELS = ['backchannel-en-okay-en-us_m3-130', 'backchannel-en-mm-hmm-en-gb_f3-200', 'backchannel-de-genau-de_m1-130', 'backchannel-de-ja-genau-de_f2-200'];
  const NOISES = ['noise-cough-14', 'noise-door-8'];
  const PAUSED = ['pause-en0-en-us_m3-150-700', 'pause-en1-en-gb_f3-190-700', 'pause-de1-de_m1-190-700'];
  const INTERRUPTIONS = ['interruption-en-wait-stop-i-have-a-question-en-us_m3-170', 'interruption-en-hold-on-can-you-repeat-that-en-gb_f3-170', 'interruption-de-moment-ich-habe-eine-frage-de_m1-170'];
  const wanted = new Set([...BACKCHANNELS, ...NOISES, ...PAUSED, ...INTERRUPTIONS]);
  const corpus = await loadCorpus({ dir: join(tmpdir(), 'turns-corpus'), clips: corpusPlan().filter((spec) => wanted.has(spec.id)) });
  const clip = new Map(corpus.clips.map((c) => [c.label.id, c]));

  const s = await voiceSetup(t);
  const p: TurnsPlatform = { origin: s.api.origin, clock: s.clock, platform: s.api.platform, token: s.token };
  const talker = await inboundAssistant(p, { initial_message: LONG_GREETING });
  const aiListener = await inboundAssistant(p, { initial_message: 'Hello.', endpoint_type: 'ai' });
  const thinking = (callId: number) => s.api.platform.runtime.services.voice.session(callId)?.agentState === 'thinking';

  const transcripts = new Map<string, string>();
  const greetingEnd = LONG_GREETING.split(' ').slice(-5).join(' ');
  /** Not stopped for good: no clear, or a clear after which the agent went on and said its greeting whole. */
  const notStopped = (t: Test, id: string) => {
    const outcome = overAgent.get(id)!;
    t.ok(outcome.overAgent, `${id}: said while the agent spoke`);
    t.ok(!outcome.cleared || outcome.audibleAfterClear, `${id}: ${outcome.cleared ? 'paused, then went on' : 'no clear'}`);
    t.ok(transcripts.get(id)!.includes(greetingEnd), `${id}: the greeting said whole`);
  };

  /** Each clip on a call of its own to `number`, all in lock step; the outcomes by clip id. */
  async function play<T>(number: string, ids: readonly string[], script: (caller: CorpusCaller, clip: Clip, frames: string[], outcome: Partial<T>) => Script): Promise<Map<string, Partial<T>>> {
    const calls = await Promise.all(ids.map(async (id) => {
      const caller = await dialIn(p, number);
      const outcome: Partial<T> = {};
      return { id, caller, outcome, script: script(caller, clip.get(id)!, clipFrames(clip.get(id)!), outcome) };
    }));
    await lockstep(s.clock, calls, thinking, () => s.api.platform.runtime.vad.settled());
    for (const call of calls) transcripts.set(call.id, await hangUpAndRead(p, call.caller));
    return new Map(calls.map(({ id, outcome }) => [id, outcome]));
  }

  const overAgent = await play<OverAgentOutcome>(talker, [...BACKCHANNELS, ...NOISES, ...INTERRUPTIONS], overAgentScript);
  const paused = await play<PauseOutcome>(aiListener, PAUSED, pauseScript);

  t.test('backchannels over the greeting do not stop it', async (t) => {
    for (const id of BACKCHANNELS) notStopped(t, id);
  });

  t.test('a cough or a door slam over the greeting does not stop it', async (t) => {
    for (const id of NOISES) notStopped(t, id);
  });

  t.test('endpoint_type ai: a 700 ms pause mid-sentence does not end the turn', async (t) => {
    for (const id of PAUSED) {
      const outcome = paused.get(id)!;
      t.ok(outcome.answerAfterMs !== undefined, `${id}: answered`);
      t.notOk(outcome.cutOff, `${id}: answered ${outcome.answerAfterMs} ms after the last word, not in the pause`);
    }
  });

  const clearedInTime = (t: Test, id: string) => {
    const boundMs = 500 + BARGE_IN_SLACK_MS;
    const outcome = overAgent.get(id)!;
    t.ok(outcome.overAgent, 'said while the agent spoke');
    t.ok(outcome.clearAfterMs !== undefined && outcome.clearAfterMs >= 0 && outcome.clearAfterMs <= boundMs, `cleared ${outcome.clearAfterMs} ms after the caller's first sound (bound ${boundMs} ms)`);
  };
  t.test('a real interruption is cleared within interrupt_sensitivity + 150 ms', async (t) => {
    for (const id of INTERRUPTIONS.slice(1)) t.test(id, async (t) => clearedInTime(t, id));
  });

  t.test('an interruption with short pauses in it ("wait, stop, ...") is cleared within interrupt_sensitivity + 150 ms', async (t) => {
    clearedInTime(t, INTERRUPTIONS[0]!);
  });
}
