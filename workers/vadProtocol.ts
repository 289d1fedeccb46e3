/**
 * What the Silero VAD worker (`vad.ts`) and its engine (`runtime/voice/hearing/vad/engine.ts`)
 * say to each other. Audio is 16 kHz PCM16; a window is 512 samples (32 ms), sent with the 64
 * samples before it (Silero v5's context).
 *
 * - in `infer`: for entry i, stream `ids[i]`'s window number `seqs[i]` as `windows[i*576 ..
 *   (i+1)*576)`; `released` streams lose their state first.
 * - out `ready` once the model is loaded, then one `result` per `infer`, in order, with each
 *   entry's speech probability (0..1) and the time the inferences took.
 */

export const WINDOW_SAMPLES = 512;
export const CONTEXT_SAMPLES = 64;
export const INPUT_SAMPLES = WINDOW_SAMPLES + CONTEXT_SAMPLES;

export interface InferMessage {
  readonly type: 'infer';
  readonly ids: Int32Array;
  readonly seqs: Int32Array;
  readonly windows: Int16Array;
  readonly released: readonly number[];
}

export type WorkerMessage = { readonly type: 'ready' } | ResultMessage;

export interface ResultMessage {
  readonly type: 'result';
  readonly ids: Int32Array;
  readonly seqs: Int32Array;
  readonly probabilities: Float32Array;
  /** The worker's time on the batch (its inferences), ms. */
  readonly inferMs: number;
}
