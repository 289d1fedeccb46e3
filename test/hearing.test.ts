import t from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { callerSpeechFrame } from '../runtime/calls/carriers/loopback.js';
import { FRAME_SAMPLES } from '../runtime/voice/audio.js';
import { Hearing, type HearingHooks } from '../runtime/voice/hearing/hearing.js';
import type { SttOptions, SttProvider } from '../runtime/voice/providers/types.js';
import type { CallSpec } from '../runtime/voice/spec.js';

/**
 * The caller's side of a call alone, on scripted timelines of 20 ms frames and transcripts, with
 * no socket, no server and no model (the way LiveKit tests its endpointing):
 * 1. End of turn: `endpoint_sensitivity` of silence after the caller's last loud frame, not a frame
 *    sooner; the turn waits for its final transcript (up to 1.5 s, or as long as the transcriber
 *    asks), and silence alone is no turn.
 * 2. Barge-in: after `interrupt_sensitivity` of speech over the agent it pauses (short dips between
 *    its words count), not sooner; the
 *    interruption stands at the caller's first word; never while the agent is only thinking, nor
 *    when interruptions are off.
 * 3. Backchannels over the agent ("mm-hmm") neither interrupt nor become a turn.
 * 4. `min_interrupt_words`: fewer words do not interrupt, enough do.
 * 4a. False interruptions: the agent pauses and resumes after a wordless "mm-hmm" (a transcriber
 *     that gives no words), a backchannel transcribed after the pause, a cough with no transcript,
 *     and too few words (which are held); it stops for good after 1.5 s of wordless speech.
 * 5. Words over the agent that did not interrupt are held, and given once it listens.
 * 6. Answering machines: an outbound call's first utterance of 3.5 s or more is a machine, a
 *    short one a person; inbound calls and calls the carrier already classified are left alone.
 * 7. Keypad digits are collected until a 1.5 s pause and become one turn.
 */

const SILENCE = new Int16Array(FRAME_SAMPLES);

interface Heard {
  readonly events: string[];
  readonly turns: Array<{ text: string; at: number; heard?: { since: number; silence: number } }>;
  interrupts: number[];
  answered: Array<'human' | 'machine'>;
  pauses: number[];
  resumes: number[];
}

/**
 * A hearing on a manual clock with a scripted transcriber (waiting `finalWaitMs` for its finals
 * when given); the agent's state is the test's to set.
 */
function rig(overrides: Partial<CallSpec> = {}, finalWaitMs?: number) {
  const clock = new ManualClock(0);
  let transcriber: SttOptions | undefined;
  const stt: SttProvider = {
    name: 'script',
    ...(finalWaitMs === undefined ? {} : { finalWaitMs }),
    open(options) {
      transcriber = options;
      return { write: () => {}, finalize: () => {}, close: () => {} };
    },
  };
  const agent = { state: 'listening', audible: false, paused: false };
  const heard: Heard = { events: [], turns: [], interrupts: [], answered: [], pauses: [], resumes: [] };
  const hooks: HearingHooks = {
    agentState: () => agent.state,
    agentAudible: () => agent.audible,
    speechStarted: () => heard.events.push(`start@${clock.now()}`),
    speechStopped: () => heard.events.push(`stop@${clock.now()}`),
    turn: (text, at) => heard.turns.push({ text, at: clock.now(), heard: at }),
    // As the session does: an interrupted agent stops and listens.
    interrupt: () => {
      heard.interrupts.push(clock.now());
      agent.state = 'listening';
      agent.audible = false;
      agent.paused = false;
    },
    pause: () => {
      heard.pauses.push(clock.now());
      agent.paused = true;
    },
    resume: () => {
      heard.resumes.push(clock.now());
      agent.paused = false;
    },
    agentPaused: () => agent.paused,
    answered: (by) => heard.answered.push(by),
    languageDetected: () => {},
    realtimeAudio: () => {},
    failed: (_kind, error) => {
      throw error;
    },
  };
  const spec = {
    callId: 1,
    type: 'inbound',
    mode: 'pipeline',
    endpointType: 'vad',
    endpointSensitivity: 0.5,
    allowInterruptions: true,
    interruptSensitivity: 0.3,
    minInterruptWords: null,
    noiseCancellation: false,
    languages: [{ code: 'en', name: 'English', voice: 'v' }],
    stt,
    answeredBy: null,
    ...overrides,
  } as unknown as CallSpec;
  const hearing = new Hearing(spec, clock, hooks);
  hearing.open();
  let index = 0;
  let lastLoud = 0;
  /** Plays `ms` of the caller's voice (or silence), one 20 ms frame at a time. */
  const play = (ms: number, voice: boolean) => {
    for (let elapsed = 0; elapsed < ms; elapsed += 20) {
      clock.advance(20);
      // The voice pauses 40 ms in every 400 (its last two frames are silent).
      if (voice && index % 20 < 18) lastLoud = clock.now();
      hearing.hear(voice ? callerSpeechFrame(index++) : SILENCE);
    }
  };
  const say = (text: string, final = true, wordless = false) => transcriber!.onTranscript({ text, final, wordless });
  return { clock, hearing, heard, agent, speak: (ms: number) => play(ms, true), silence: (ms: number) => play(ms, false), say, lastLoud: () => lastLoud };
}

t.test('end of turn: the configured silence after the last loud frame, and the final transcript', async (t) => {
  const r = rig();
  r.silence(200);
  r.speak(760);
  const lastVoice = r.lastLoud();
  r.say('What are your opening hours?');
  r.silence(480);
  t.same(r.heard.turns, [], 'not 20 ms before the 500 ms of silence');
  r.silence(20);
  t.equal(r.heard.turns.length, 1, 'the turn ends once 500 ms have passed since the last loud frame');
  t.match(r.heard.turns[0], { text: 'What are your opening hours?', heard: { since: lastVoice, silence: 500 } });
  t.equal(r.heard.turns[0]!.at - lastVoice, 500, 'at 500 ms of silence exactly');
  t.same(r.heard.events.map((e) => e.split('@')[0]), ['start', 'stop'], 'speech started and stopped once');

  r.silence(3_000);
  t.equal(r.heard.turns.length, 1, 'silence alone is no turn');

  // A transcriber that is late with the final words: the turn waits for them.
  r.speak(600);
  r.say('And on Sundays', false);
  r.silence(600);
  t.equal(r.heard.turns.length, 1, 'no final words yet: the turn waits');
  r.say('And on Sundays?');
  t.equal(r.heard.turns.at(-1)!.text, 'And on Sundays?', 'and ends when they come');

  // Words that never become final settle after 1.5 s without them: nothing was said.
  r.speak(600);
  r.say('uh', false);
  r.silence(2_200);
  t.equal(r.heard.turns.length, 2, 'an utterance without final words is no turn');
});

t.test("a transcriber that asks for longer (a batch request) has its final waited for that long", async (t) => {
  const r = rig({}, 6_000);
  r.speak(600);
  r.silence(500);
  r.silence(4_000);
  t.same(r.heard.turns, [], 'no words yet, 4 s after the end of the turn: still waiting');
  r.say('Can I pay by card?');
  t.equal(r.heard.turns.at(-1)?.text, 'Can I pay by card?', 'the words make the turn');
  r.speak(600);
  r.silence(500 + 6_000);
  r.say('too late');
  r.silence(600);
  t.equal(r.heard.turns.length, 1, 'after its wait the utterance settled without words');
});

t.test('barge-in: after interrupt_sensitivity of speech over the agent, never sooner, never while it thinks', async (t) => {
  const r = rig();
  r.agent.state = 'speaking';
  r.agent.audible = true;
  r.silence(100);
  const began = r.clock.now();
  r.speak(300);
  t.same(r.heard.pauses, [], 'not within 300 ms of speech');
  r.speak(60);
  t.equal(r.heard.pauses.length, 1, 'then the agent pauses');
  t.equal(r.heard.pauses[0]! - began, 340, '300 ms after the speech onset (three frames)');
  t.same(r.heard.interrupts, [], 'not yet for good: no words so far');
  r.say('wait', false);
  t.same(r.heard.interrupts, [r.clock.now()], 'the first word makes the interruption stand, at once');

  // "Wait, stop": a dip between its words counts toward the threshold; a long silence starts anew.
  const dip = rig();
  dip.agent.state = 'speaking';
  dip.agent.audible = true;
  dip.silence(100);
  const onset = dip.clock.now();
  dip.speak(120);
  dip.silence(200);
  t.same(dip.heard.pauses, [], 'not during the dip');
  for (let i = 0; i < 20 && dip.heard.pauses.length === 0; i++) dip.speak(20);
  t.equal(dip.heard.pauses.length, 1, 'the agent pauses once the voice is back');
  // Without the dip counted it would take 300 ms of frames called speech: 500 ms here.
  t.ok(dip.heard.pauses[0]! - onset <= 400, `as soon as the voice is heard again: 300 ms of the utterance with its dip (${dip.heard.pauses[0]! - onset} ms)`);

  const thinking = rig();
  thinking.agent.state = 'thinking';
  thinking.speak(2_000);
  t.same(thinking.heard.interrupts, [], 'the agent thinking (no audio yet) is not interrupted');

  const off = rig({ allowInterruptions: false });
  off.agent.state = 'speaking';
  off.agent.audible = true;
  off.speak(2_000);
  t.same(off.heard.interrupts, [], 'interruptions off: never');
});

t.test('a backchannel over the agent neither interrupts nor becomes a turn', async (t) => {
  const r = rig();
  r.agent.state = 'speaking';
  r.agent.audible = true;
  r.speak(100);
  r.say('mm-hmm', false);
  r.speak(400);
  t.same(r.heard.interrupts, [], 'no interruption for "mm-hmm"');
  t.same(r.heard.pauses, [], 'not even a pause: it was known to be a backchannel in time');
  r.say('mm-hmm');
  r.silence(800);
  t.same(r.heard.turns, [], 'and no turn');
  r.agent.state = 'listening';
  r.agent.audible = false;
  t.equal(r.hearing.takeHeldTurn(), '', 'nothing held');
});

t.test('min_interrupt_words: fewer words over the agent do not interrupt, enough do', async (t) => {
  const r = rig({ minInterruptWords: 3 });
  r.agent.state = 'speaking';
  r.agent.audible = true;
  r.speak(100);
  r.say('wait', false);
  r.speak(600);
  t.same(r.heard.interrupts, [], 'one word: no');
  t.equal(r.heard.pauses.length, 1, 'but the agent pauses while it may come to more');
  r.say('wait a second', false);
  t.equal(r.heard.interrupts.length, 1, 'three words: the caller interrupts as they are transcribed');
});

t.test('false interruptions: the agent pauses, then resumes unless the caller takes the turn', async (t) => {
  const overAgent = (overrides: Partial<CallSpec> = {}) => {
    const r = rig(overrides);
    r.agent.state = 'speaking';
    r.agent.audible = true;
    return r;
  };

  // "Mm-hmm" for 600 ms from a transcriber that gives no words (the dev one): judged by its length.
  const hum = overAgent();
  hum.speak(600);
  hum.say('speech speech', false, true);
  t.equal(hum.heard.pauses.length, 1, 'a wordless "mm-hmm": the agent pauses at the threshold');
  hum.say('(caller speech, 0.6 s)', true, true);
  hum.silence(500);
  t.same(hum.heard.resumes.length, 1, 'and resumes once the utterance settles');
  t.ok(hum.heard.resumes[0]! - hum.lastLoud() <= 500, `within the end-of-turn silence (${hum.heard.resumes[0]! - hum.lastLoud()} ms)`);
  t.same([hum.heard.interrupts, hum.heard.turns], [[], []], 'no interruption, no turn');
  hum.agent.state = 'listening';
  hum.agent.audible = false;
  t.equal(hum.hearing.takeHeldTurn(), '', 'and nothing held to answer later');

  // A backchannel whose words come after the pause.
  const yeah = overAgent();
  yeah.speak(560);
  t.equal(yeah.heard.pauses.length, 1, 'paused before any words');
  yeah.say('yeah', false);
  t.same(yeah.heard.interrupts, [], '"yeah" does not take the turn');
  yeah.say('Yeah.');
  yeah.silence(500);
  t.equal(yeah.heard.resumes.length, 1, 'the agent resumes after "yeah"');
  t.same(yeah.heard.turns, [], 'and it is no turn');

  // A cough: sound with no transcript at all (the transcriber's final is empty).
  const cough = overAgent();
  cough.speak(700);
  t.equal(cough.heard.pauses.length, 1, 'a cough pauses the agent');
  cough.silence(500);
  cough.say('');
  t.equal(cough.heard.resumes.length, 1, 'an empty final resumes it');
  t.same([cough.heard.interrupts, cough.heard.turns], [[], []]);

  // The same cough with a transcriber that never finalises: the wait for a final bounds the pause.
  const silent = overAgent();
  silent.speak(700);
  silent.silence(2_100);
  t.equal(silent.heard.resumes.length, 1, 'resumed after the wait for the final transcript');

  // Fewer words than min_interrupt_words: the agent resumes, the words are kept for its next turn.
  const few = overAgent({ minInterruptWords: 3 });
  few.speak(600);
  few.say('Tuesday');
  few.silence(500);
  t.same([few.heard.interrupts.length, few.heard.resumes.length], [0, 1], 'one word of three: resumed');
  few.agent.state = 'listening';
  few.agent.audible = false;
  t.equal(few.hearing.takeHeldTurn(), 'Tuesday', 'the word is held for after the agent');

  // Speech that goes on without words is someone talking: the interruption stands after 1.5 s of it.
  const talk = overAgent();
  const began = talk.clock.now();
  talk.speak(1_480);
  talk.say('speech speech speech speech', false, true);
  t.same(talk.heard.interrupts, [], 'not within 1.5 s');
  talk.speak(60);
  t.equal(talk.heard.interrupts.length, 1, 'then it stands');
  t.ok(talk.heard.interrupts[0]! - began <= 1_560, `1.5 s of speech after its onset (${talk.heard.interrupts[0]! - began} ms)`);
  talk.say('(caller speech, 1.6 s)', true, true);
  talk.silence(500);
  t.equal(talk.heard.turns.length, 1, 'and the caller has the turn');
  t.same(talk.heard.resumes, [], 'no resume');
});

t.test("realtime calls: the agent pauses, and the model's transcript of the utterance decides", async (t) => {
  const overAgent = () => {
    const r = rig({ mode: 'multimodal', stt: undefined });
    r.agent.state = 'speaking';
    r.agent.audible = true;
    return r;
  };
  const hum = overAgent();
  hum.speak(600);
  t.equal(hum.heard.pauses.length, 1, 'paused at the threshold');
  t.equal(hum.hearing.realtimeTurnEnded(), undefined, "the model's end of the utterance is no turn while paused");
  t.ok(hum.hearing.decidingPause, 'its words are awaited');
  t.equal(hum.hearing.realtimeWords('Mm-hmm.'), undefined, '"mm-hmm" takes no turn');
  t.same([hum.heard.resumes.length, hum.heard.interrupts.length], [1, 0], 'the agent resumes');

  const stop = overAgent();
  stop.speak(700);
  const lastHeard = stop.clock.now();
  stop.hearing.realtimeTurnEnded();
  stop.silence(400);
  t.match(stop.hearing.realtimeWords('Stop, I have a question.'), { since: Number }, 'words that take the turn are the caller\'s turn');
  t.ok(stop.heard.interrupts.length === 1 && stop.heard.resumes.length === 0, 'the interruption stands');
  t.ok(lastHeard - 20 <= stop.heard.interrupts[0]!, 'decided once the words came');

  const mute = overAgent();
  mute.speak(600);
  mute.hearing.realtimeTurnEnded();
  mute.silence(1_980);
  t.same(mute.heard.resumes, [], 'waiting for the words');
  mute.silence(40);
  t.equal(mute.heard.resumes.length, 1, 'no words within 2 s: the agent resumes');
  t.notOk(mute.hearing.decidingPause);

  const long = overAgent();
  long.speak(1_560);
  t.equal(long.heard.interrupts.length, 1, '1.5 s of speech stands as an interruption before any words');
});

t.test('words over the agent that did not interrupt are held until it listens', async (t) => {
  const r = rig({ allowInterruptions: false });
  r.agent.state = 'speaking';
  r.agent.audible = true;
  r.speak(800);
  r.say('I also need a receipt');
  r.silence(700);
  t.same(r.heard.turns, [], 'not a turn while the agent speaks');
  t.equal(r.hearing.unanswered(), 'I also need a receipt', 'kept, should the call end now');
  r.agent.state = 'listening';
  r.agent.audible = false;
  t.equal(r.hearing.takeHeldTurn(), 'I also need a receipt', 'given once the agent listens');
  t.equal(r.hearing.takeHeldTurn(), '', 'once');
});

t.test('answering machines: a long first utterance of an outbound call is a machine, a short one a person', async (t) => {
  const machine = rig({ type: 'outbound' });
  machine.speak(4_000);
  machine.silence(400);
  t.same(machine.heard.answered, ['machine'], '4 s greeting: a machine');

  const person = rig({ type: 'outbound' });
  person.speak(800);
  person.silence(400);
  person.speak(5_000);
  person.silence(400);
  t.same(person.heard.answered, ['human'], '"Hello?": a person, decided once');

  const inbound = rig({ type: 'inbound' });
  inbound.speak(4_000);
  inbound.silence(400);
  t.same(inbound.heard.answered, [], 'inbound calls are not classified');

  const told = rig({ type: 'outbound', answeredBy: 'human' });
  told.speak(4_000);
  told.silence(400);
  t.same(told.heard.answered, [], 'the carrier said so already');
});

t.test('keypad digits are collected until a pause and become one turn', async (t) => {
  const r = rig();
  for (const key of ['1', '2', '#']) {
    r.hearing.dtmf(key);
    r.silence(400);
  }
  r.hearing.dtmf('x');
  t.same(r.heard.turns, [], 'not before the 1.5 s pause');
  r.silence(1_200);
  t.same(r.heard.turns.map((turn) => ({ text: turn.text, heard: turn.heard })), [{ text: '[The caller pressed the keys 12#]', heard: undefined }], 'one turn, keys only (not a key: ignored)');
});
