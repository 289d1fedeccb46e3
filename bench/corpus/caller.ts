import { MediaStreamPhone } from '../../runtime/calls/carriers/loopback.js';
import type { ManualClock } from '../../runtime/clock.js';
import { levelDb, mulawDecode } from '../../runtime/voice/audio.js';
import type { Clip, ClipLabel } from './build.js';

/**
 * Corpus clips played as the caller over the Twilio media-stream protocol, on the platform's
 * manual clock, several calls in lock step: each round every caller sends one 20 ms mu-law frame,
 * waits until the server has handled it (ping/pong), the clock moves 20 ms (the server's ticker
 * sends the agent's audio then), and each caller waits again to have what the server sent. Time is
 * simulated, so a run goes as fast as the machine allows and reads the same on a slow one; the
 * server's decisions are read from what a carrier sees: `clear` (the agent was interrupted), the
 * agent's audio after a clear (it resumed) and its next audio after the caller's turn (it
 * answered: the turn ended there).
 */

const FRAME_BYTES = 160;
const FRAME_MS = 20;
/** An agent frame this loud is speech (the dev voice speaks at about -20 dBFS; its gaps are silent). */
const AUDIBLE_DB = -32;
const SILENCE = Buffer.alloc(FRAME_BYTES, 0xff).toString('base64');

export class CorpusCaller {
  readonly phone: MediaStreamPhone;
  /** Simulated ms since the caller connected. */
  elapsed = 0;
  /** Simulated times of the agent's audible frames. */
  readonly agentAudible: number[] = [];
  /** Simulated times of the server's `clear` messages. */
  readonly clears: number[] = [];

  constructor(url: string, callSid: string, parameters: Record<string, string>, readonly callId: number) {
    this.phone = new MediaStreamPhone(url, { callSid, customParameters: parameters }, { decode: false });
    this.phone.on('payload', (payload) => {
      if (levelDb(mulawDecode(payload)) > AUDIBLE_DB) this.agentAudible.push(this.elapsed);
    });
    this.phone.on('clear', () => this.clears.push(this.elapsed));
  }

  /** The agent's last audible frame, or -Infinity. */
  get lastAudible(): number {
    return this.agentAudible.at(-1) ?? -Infinity;
  }

  /** The first audible agent frame at or after `since`. */
  audibleFrom(since: number): number | undefined {
    return this.agentAudible.find((at) => at >= since);
  }
}

/** What a caller sends each round: a base64 mu-law frame, or silence. Returns when the call's script is over. */
export type Script = Generator<string | undefined, void, void>;

/** Base64 of each 20 ms frame of a clip. */
export function clipFrames(clip: Clip): string[] {
  const frames: string[] = [];
  for (let offset = 0; offset < clip.audio.length; offset += FRAME_BYTES) frames.push(Buffer.from(clip.audio.subarray(offset, offset + FRAME_BYTES)).toString('base64'));
  return frames;
}

/** Silence until `condition` holds, at most `maxMs`; returns whether it held. */
export function* until(caller: CorpusCaller, condition: () => boolean, maxMs: number): Generator<undefined, boolean, void> {
  const start = caller.elapsed;
  while (!condition()) {
    if (caller.elapsed - start >= maxMs || caller.phone.closed) return false;
    yield undefined;
  }
  return true;
}

/**
 * Runs the calls' scripts in lock step until every one is over. `thinking` tells whether a call's
 * agent is preparing an answer: the clock waits (briefly, in real time) for answers travelling
 * over real sockets and promises, so simulated time does not run ahead of them.
 */
/**
 * Plays the scripts frame by frame on the manual clock: each round every caller sends a frame, the
 * server takes them (and, with `settled`, the VAD answers them: a worker thread answers in real
 * time, which simulated time must not outrun), then the clock moves 20 ms.
 */
export async function lockstep(clock: ManualClock, calls: ReadonlyArray<{ caller: CorpusCaller; script: Script }>, thinking: (callId: number) => boolean, settled: () => Promise<void> = async () => {}): Promise<void> {
  let live = [...calls];
  const syncAll = () => Promise.all(live.map(({ caller }) => caller.phone.sync()));
  while (live.length > 0) {
    live = live.filter(({ caller, script }) => {
      const next = script.next();
      if (next.done) return false;
      if (!caller.phone.closed) caller.phone.speakEncoded(next.value ?? SILENCE);
      return true;
    });
    await syncAll();
    await settled();
    for (let spins = 0; spins < 200 && live.some(({ caller }) => thinking(caller.callId)); spins++) await new Promise((resolve) => setImmediate(resolve));
    clock.advance(FRAME_MS);
    for (const { caller } of live) caller.elapsed += FRAME_MS;
    await syncAll();
  }
}

/** Where a clip's first sound (voice or noise) begins, ms into the clip. */
export function onsetMs(label: ClipLabel): number {
  return Math.min(label.speech[0]?.startMs ?? Infinity, label.sounds[0]?.startMs ?? Infinity);
}

export interface PauseOutcome {
  /** The agent answered before the caller's last word: the pause ended the turn. */
  cutOff: boolean;
  /** From the end of the caller's speech to the agent's first audio (ms; negative when cut off); undefined without an answer. */
  answerAfterMs: number | undefined;
}

/**
 * A clip said to a listening agent (after its greeting): did the agent answer before the caller had
 * finished (a false cut-off), and how long after the caller's last word did it answer.
 */
export function* pauseScript(caller: CorpusCaller, clip: Clip, frames: readonly string[], outcome: Partial<PauseOutcome>): Script {
  if (!(yield* until(caller, () => caller.agentAudible.length > 0, 5_000))) return;
  if (!(yield* until(caller, () => caller.elapsed - caller.lastAudible >= 600, 20_000))) return;
  const start = caller.elapsed;
  for (const frame of frames) yield frame;
  const end = start + clip.label.speech.at(-1)!.endMs;
  yield* until(caller, () => caller.audibleFrom(start) !== undefined, 5_000);
  const answer = caller.audibleFrom(start);
  outcome.answerAfterMs = answer === undefined ? undefined : answer - end;
  outcome.cutOff = answer !== undefined && answer < end;
}

export interface OverAgentOutcome {
  /** The server cleared the agent's audio while the clip played or within the 3 s after it. */
  cleared: boolean;
  /** From the clip's first sound to the first `clear` (ms). */
  clearAfterMs: number | undefined;
  /** The agent was audible again after the clear. */
  audibleAfterClear: boolean;
  /** The agent was speaking when the clip began (otherwise the run says nothing). */
  overAgent: boolean;
}

/** Silence after the clip while the server may still clear, resume or answer. */
export const AFTER_CLIP_MS = 3_000;

/** A clip said over the agent's speech, 1 s into it: was the agent cleared, how soon, did it come back. */
export function* overAgentScript(caller: CorpusCaller, clip: Clip, frames: readonly string[], outcome: Partial<OverAgentOutcome>): Script {
  if (!(yield* until(caller, () => caller.agentAudible.length > 0, 5_000))) return;
  const first = caller.agentAudible[0]!;
  yield* until(caller, () => caller.elapsed - first >= 1_000, 2_000);
  const start = caller.elapsed;
  outcome.overAgent = start - caller.lastAudible <= 200;
  for (const frame of frames) yield frame;
  yield* until(caller, () => false, AFTER_CLIP_MS);
  // Then until the agent has finished (1 s without its voice): a greeting that resumed is said whole.
  yield* until(caller, () => caller.elapsed - caller.lastAudible >= 1_000, 30_000);
  const clear = caller.clears.find((at) => at >= start);
  outcome.cleared = clear !== undefined;
  outcome.clearAfterMs = clear === undefined ? undefined : clear - start - onsetMs(clip.label);
  outcome.audibleAfterClear = clear !== undefined && caller.audibleFrom(clear + FRAME_MS) !== undefined;
}
