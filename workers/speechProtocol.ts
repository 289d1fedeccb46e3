/**
 * Messages between the platform and the speech synthesis worker (`workers/speech.ts`), which runs
 * the offline espeak-ng synthesizer for the `dev` voice. Audio comes back as PCM16 mono 16 kHz in
 * chunks as it is produced, each chunk's buffer transferred.
 */

/** Speak `text` as request `id`; chunks follow, then `done` (or `failed`). */
export interface SpeakMessage {
  readonly type: 'speak';
  readonly id: number;
  readonly text: string;
  /** An espeak-ng voice name with an optional variant, e.g. `en-us+f3`; English when it is unknown. */
  readonly voice: string;
  /** Words per minute (espeak-ng's 80-450). */
  readonly rate: number;
  /** Base pitch, 0-99. */
  readonly pitch: number;
}

/** Stop request `id`: nothing more of it is sent, not even `done`. */
export interface CancelMessage {
  readonly type: 'cancel';
  readonly id: number;
}

export type SpeechRequest = SpeakMessage | CancelMessage;

export type SpeechReply =
  | { readonly type: 'ready'; readonly loadMs: number }
  | { readonly type: 'audio'; readonly id: number; readonly samples: Int16Array }
  /** `synthMs`: the thread's time on the request; `samples`: how many it produced. */
  | { readonly type: 'done'; readonly id: number; readonly synthMs: number; readonly samples: number }
  | { readonly type: 'failed'; readonly id: number; readonly message: string };
