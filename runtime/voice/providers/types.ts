import type { FunctionDefinition } from '../../llm/types.js';

/**
 * Speech providers behind three interfaces, so engines do not know vendors. All audio here is the
 * call's internal format (PCM16 mono 16 kHz); adapters convert at their edge.
 */

/** How a fixed text (greeting, voicemail message) is asked of a realtime model. */
export const SAY_EXACTLY = 'Say exactly this, nothing else: ';

export interface Transcript {
  readonly text: string;
  /** Interim results may change; a final one is settled. */
  readonly final: boolean;
  /** ISO 639-1 code when the provider detected the language. */
  readonly language?: string;
  /**
   * The text only stands for speech the transcriber did not put into words (the `dev` one):
   * turn-taking judges such an utterance by its length, not by its "words".
   */
  readonly wordless?: boolean;
}

export interface SttStream {
  /** One 20 ms frame; `speech` is the VAD's verdict (providers with their own detection ignore it). */
  write(frame: Int16Array, speech: boolean): void;
  /** Settles what was said so far into a final transcript (end of the caller's turn). */
  finalize(): void;
  close(): void;
}

export interface SttOptions {
  readonly callId: number;
  /** Primary language (ISO 639-1) first, then the secondary ones to detect. */
  readonly languages: readonly string[];
  onTranscript(transcript: Transcript): void;
  /** The provider failed; the stream is unusable. */
  onError(error: Error): void;
}

export interface SttProvider {
  readonly name: string;
  /**
   * How long, in milliseconds, a final transcript may take after `finalize` before the turn
   * settles without it; hearing's default (1.5 s) when absent. A transcriber that only starts on
   * an utterance once it is over (a batch request) needs longer.
   */
  readonly finalWaitMs?: number;
  /** Opens a stream; providers with sockets connect now so the first frame is not delayed. */
  open(options: SttOptions): SttStream;
}

export interface TtsRequest {
  readonly text: string;
  /** The provider's own voice id (from the voice catalog). */
  readonly voice: string;
  readonly language: string;
  readonly speed: number;
  readonly stability: number;
  readonly similarity: number;
  readonly emotion: boolean;
  readonly signal: AbortSignal;
}

export interface TtsProvider {
  readonly name: string;
  /** Streams PCM16 16 kHz audio of the text as it is produced; each chunk is handed over and never changed afterwards. */
  synthesize(request: TtsRequest): AsyncIterable<Int16Array>;
}

export type RealtimeEvent =
  | { readonly type: 'speech_started' }
  | { readonly type: 'speech_stopped' }
  /** `wordless`: the text only stands for speech the model did not put into words (the `dev` one; see `Transcript.wordless`). */
  | { readonly type: 'user_transcript'; readonly text: string; readonly wordless?: boolean }
  /** `tag`: the one given to `createResponse`, when the vendor echoes it. */
  | { readonly type: 'response_started'; readonly responseId: string; readonly tag?: string }
  | { readonly type: 'audio'; readonly responseId: string; readonly itemId: string; readonly samples: Int16Array }
  | { readonly type: 'text'; readonly responseId: string; readonly itemId: string; readonly delta: string }
  | { readonly type: 'function_call'; readonly responseId: string; readonly callId: string; readonly name: string; readonly arguments: string }
  | { readonly type: 'response_done'; readonly responseId: string; readonly status: 'completed' | 'cancelled' | 'failed' | 'incomplete' }
  | { readonly type: 'error'; readonly message: string; readonly fatal: boolean };

export interface RealtimeOptions {
  readonly callId: number;
  readonly model: string;
  readonly instructions: string;
  readonly voice: string;
  readonly tools: readonly FunctionDefinition[];
  readonly temperature: number;
  /** Server VAD threshold (0-1) from `turn_detection_threshold`. */
  readonly turnDetectionThreshold: number | null;
  /** Silence that ends a turn, from `endpoint_sensitivity`. */
  readonly silenceMs: number;
  /** `endpoint_type`: `ai` asks the vendor's semantic end-of-turn detection (how eager from `silenceMs`) instead of silence alone. */
  readonly endpointType: 'vad' | 'ai';
  /** `audio` (multimodal) or `text` (dualplex: the assistant's own TTS speaks it). */
  readonly output: 'audio' | 'text';
  /** `speech_speed` (0.7-1.2) for the model's own voice (multimodal). */
  readonly speed: number;
  onEvent(event: RealtimeEvent): void;
}

export interface RealtimeSession {
  appendAudio(frame: Int16Array): void;
  /**
   * Asks for a response; `instructions` overrides the session's for this one (greetings, goodbyes);
   * `tag` comes back on its `response_started`, telling it from a late start of an earlier one.
   */
  createResponse(instructions?: string, tag?: string): void;
  cancelResponse(): void;
  /** Tells the model only `audioEndMs` of item `itemId` was heard (barge-in). */
  truncate(itemId: string, audioEndMs: number): void;
  /** Adds text the model should treat as said (the greeting, DTMF keys). */
  addMessage(role: 'user' | 'assistant', text: string): void;
  sendFunctionResult(callId: string, output: unknown): void;
  close(): void;
}

export interface RealtimeProvider {
  readonly name: string;
  connect(options: RealtimeOptions): RealtimeSession;
}

/** Linear resampling between two rates, keeping its phase across chunks. */
export class Resampler {
  private position = 0;
  private last = 0;
  private readonly step: number;

  constructor(readonly fromRate: number, readonly toRate: number) {
    this.step = fromRate / toRate;
  }

  process(input: Int16Array): Int16Array {
    if (this.fromRate === this.toRate) return input;
    const out: number[] = [];
    let position = this.position;
    while (position < input.length) {
      const index = Math.floor(position);
      const fraction = position - index;
      const a = index - 1 < 0 ? this.last : input[index - 1]!;
      const b = input[index]!;
      out.push(Math.round(a + (b - a) * fraction));
      position += this.step;
    }
    this.position = position - input.length;
    if (input.length > 0) this.last = input[input.length - 1]!;
    return Int16Array.from(out);
  }
}

/** Told how long a vendor took to its first useful byte (transcript, audio), in milliseconds. */
export interface FirstByteProbe {
  (kind: 'stt' | 'tts' | 'realtime', provider: string, ms: number): void;
}
