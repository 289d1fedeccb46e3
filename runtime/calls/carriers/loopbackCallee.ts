import type { Clock } from '../../clock.js';
import { FRAME_MS, FRAME_SAMPLES, SAMPLE_RATE } from '../../voice/audio.js';
import { MediaStreamPhone, callerSpeechFrame, type LoopbackDial, type LoopbackLine } from './loopback.js';

/**
 * The loopback carrier's simulated callee (for `npm start` without a carrier, and tests that do not
 * bring their own): who answers a number, by its last four digits, so a call can end every way a
 * real one does without a carrier account.
 *
 * | ends in | the callee                                                                          |
 * |---------|-------------------------------------------------------------------------------------|
 * | `0001`  | busy: the carrier reports `busy` at once                                             |
 * | `0002`  | does not answer: `ringing`, then `no-answer` after {@link LOOPBACK_RING_MS}          |
 * | `0003`  | fails: the carrier reports `failed` at once                                          |
 * | `0004`  | an answering machine: answers, a greeting of {@link LOOPBACK_GREETING_MS}, a pause, a 1 kHz beep, then silence |
 * | other   | answers and stays silent                                                             |
 *
 * Statuses go the way a real carrier's status callbacks do (`LoopbackLine.report`). Phones that
 * answer send a frame every 20 ms by the calls' clock; on a manual clock each frame's timer
 * resolves once the platform has taken the frame (`ManualClock.settled`).
 */

/** How long a number that does not answer rings before its network gives up (`no-answer`); an assistant's shorter `ringing_time` ends the call first. */
export const LOOPBACK_RING_MS = 30_000;
/** The answering machine's greeting (speech with short pauses): well over the 3.5 s of a first utterance that the platform takes for a machine. */
export const LOOPBACK_GREETING_MS = 6_000;
/** The answering machine's quiet between its greeting and its beep. */
export const LOOPBACK_BEEP_GAP_MS = 800;
/** The answering machine's beep, a 1 kHz tone. */
export const LOOPBACK_BEEP_MS = 500;

export type LoopbackCalleeKind = 'busy' | 'no-answer' | 'failed' | 'machine' | 'silent';

const BY_ENDING: Readonly<Record<string, LoopbackCalleeKind>> = { '0001': 'busy', '0002': 'no-answer', '0003': 'failed', '0004': 'machine' };

/** Who answers `number` on the loopback carrier. */
export function calleeKind(number: string): LoopbackCalleeKind {
  return BY_ENDING[number.slice(-4)] ?? 'silent';
}

/** The simulated callee, by the number dialled (see the table above); `clock`: the calls' clock. */
export function loopbackCallee(clock: Clock): (call: LoopbackDial, line: LoopbackLine) => void {
  const silent = silentPhone(clock);
  const machine = answeringMachine(clock);
  return (call, line) => {
    switch (calleeKind(call.to)) {
      case 'busy':
        return line.report('busy');
      case 'failed':
        return line.report('failed');
      case 'no-answer':
        return ringUnanswered(clock, line);
      case 'machine':
        return machine(call);
      case 'silent':
        return silent(call);
    }
  };
}

/** Rings for {@link LOOPBACK_RING_MS}, then reports `no-answer`; stops ringing when the platform hangs up first. */
function ringUnanswered(clock: Clock, line: LoopbackLine): void {
  line.report('ringing');
  const timer = clock.setTimeout(() => {
    forget();
    line.report('no-answer');
  }, LOOPBACK_RING_MS);
  const forget = line.onHangUp(() => clock.clearTimeout(timer));
}

const SILENCE = new Int16Array(FRAME_SAMPLES);

/** A 1 kHz tone at about -10 dBFS: a whole number of periods per frame, so every frame is the same. */
const BEEP = (() => {
  const frame = new Int16Array(FRAME_SAMPLES);
  for (let i = 0; i < FRAME_SAMPLES; i++) frame[i] = Math.round(10_000 * Math.sin((2 * Math.PI * 1_000 * i) / SAMPLE_RATE));
  return frame;
})();

/** Answers and stays silent until the call ends. */
export function silentPhone(clock: Clock): (call: LoopbackDial) => void {
  return pacedPhone(clock, () => SILENCE);
}

/** Answers with a greeting, a pause and a beep, then stays silent (it records until the call ends). */
export function answeringMachine(clock: Clock): (call: LoopbackDial) => void {
  const greeting = LOOPBACK_GREETING_MS / FRAME_MS;
  const beepFrom = greeting + LOOPBACK_BEEP_GAP_MS / FRAME_MS;
  const beepTo = beepFrom + LOOPBACK_BEEP_MS / FRAME_MS;
  return pacedPhone(clock, (index) => (index < greeting ? callerSpeechFrame(index) : index >= beepFrom && index < beepTo ? BEEP : SILENCE));
}

/**
 * A phone that answers (connects its media stream) and sends `frameAt(n)` as its n-th 20 ms frame,
 * paced by `clock` from a schedule (not from each frame's send, so frames do not drift behind the
 * clock), until the call ends. The platform's audio to it is not decoded.
 */
function pacedPhone(clock: Clock, frameAt: (index: number) => Int16Array): (call: LoopbackDial) => void {
  return (call) => {
    const phone = new MediaStreamPhone(call.streamUrl, { callSid: call.carrierCallId, customParameters: { call_id: String(call.callId), token: call.token } }, { decode: false });
    let timer: unknown;
    let closed = false;
    let next = 0;
    let index = 0;
    const nextFrame = () => {
      next += FRAME_MS;
      timer = clock.setTimeout(() => {
        phone.speak(frameAt(index++));
        nextFrame();
        // Settles once the platform has taken the frame: what a manual clock's `settled` waits for.
        return phone.sync();
      }, Math.max(0, next - clock.now()));
    };
    phone.open().then(
      () => {
        if (closed) return;
        next = clock.now();
        nextFrame();
      },
      () => {},
    );
    phone.on('close', () => {
      closed = true;
      clock.clearTimeout(timer);
    });
  };
}
