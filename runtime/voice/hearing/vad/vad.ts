/**
 * The voice activity detector seam. Hearing asks one question per 20 ms caller frame (16 kHz
 * PCM16, 320 samples) and gets its answer at once: is the caller speaking (with onset and
 * hangover smoothing), and was this frame loud (end-of-turn silence is timed from the last loud
 * frame). Behind it: the energy VAD (`energy.ts`, no model) and Silero (`silero.ts`, a neural
 * model run in a worker thread, whose answers arrive a window or two late).
 */

export interface Vad {
  /** Classifies one 20 ms frame; returns whether the caller is speaking (confirmed speech). */
  process(frame: Int16Array): boolean;
  /** The last answer of `process`. */
  readonly speaking: boolean;
  /** Whether the last frame was loud enough for speech (inside speech, false on the dips it spans). */
  readonly loud: boolean;
  /** The call ended: releases what the VAD holds for it. Idempotent. */
  close(): void;
}

/** The process's VAD implementation (`VOICE_VAD`): one `Vad` per call. */
export interface VadSource {
  readonly name: 'energy' | 'silero';
  open(callId: number): Vad;
  /**
   * Resolves once every frame given so far has its answer. On a manual clock (tests, `bench:turns`)
   * time moves only when told, so it must wait for a worker that answers in real time.
   */
  settled(): Promise<void>;
  /** The platform stops: releases worker threads and models. */
  close(): Promise<void>;
}
