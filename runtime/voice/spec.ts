import type { FunctionContext } from '../agent/functions.js';
import type { ModelChoice } from '../agent/round.js';
import type { FunctionDefinition } from '../llm/types.js';
import type { AmbientSound } from './audio.js';
import type { RealtimeProvider, SttProvider, TtsProvider } from './providers/types.js';
import type { VadSource } from './hearing/vad/vad.js';
import type { Builtin } from './speaking/builtins.js';

/**
 * What a call is made of, as the voice engine sees it: the spec the business side maps an
 * assistant to, the transport a serializer adapts a carrier's socket to, and the hooks through
 * which the engine reports back (status, end, metrics). The engine knows nothing else of calls.
 */

export type CallMode = 'pipeline' | 'multimodal' | 'dualplex';

/** The one audio interface every transport speaks: PCM16 16 kHz frames in and out. */
export interface CallTransport {
  sendAudio(frame: Int16Array): void;
  /** Asks the far end to echo `name` when everything sent so far has been played. */
  sendMark(name: string): void;
  /** Discards audio the far end has buffered but not played. */
  clear(): void;
  /** Ends the media connection; `reason` tells the far end why, where its protocol can (a browser's close frame). */
  close(reason?: string): void;
}

export interface TranscriptEntry {
  readonly role: 'assistant' | 'user';
  text: string;
}

export interface CallSpec {
  readonly callId: number;
  readonly ownerId: number;
  readonly type: 'inbound' | 'outbound' | 'web';
  readonly mode: CallMode;
  readonly systemPrompt: string;
  readonly greeting: string | null;
  readonly waitForCustomer: boolean;
  readonly timers: { ringingMs: number; maxDurationMs: number; maxSilenceMs: number; initialSilenceMs: number | null; reengageMs: number };
  readonly reengagementPrompt: string | null;
  readonly voiceMailMessage: string | null;
  readonly endCallOnVoicemail: boolean;
  readonly allowInterruptions: boolean;
  readonly interruptSensitivity: number;
  readonly minInterruptWords: number | null;
  readonly endpointType: 'vad' | 'ai';
  readonly endpointSensitivity: number;
  readonly fillers: boolean;
  readonly temperature: number;
  readonly ambient: { sound: AmbientSound; volume: number } | null;
  /** The process's voice activity detector (`VOICE_VAD`). @defaultValue the energy VAD */
  readonly vad?: VadSource;
  /** `enable_noise_cancellation`: caller audio is cleaned before the VAD and the transcriber. */
  readonly noiseCancellation: boolean;
  /** Languages by ISO code, the primary first, with a voice of the assistant's provider in each. */
  readonly languages: readonly Language[];
  readonly voiceSettings: { speed: number; stability: number; similarity: number; emotion: boolean };
  readonly llm: ModelChoice;
  readonly fallback: ModelChoice | undefined;
  /** Multimodal and dualplex: `chat_llm_fallback_id`, which handles tool calls when the realtime model's function calling fails or times out. */
  readonly toolFallback: ModelChoice | undefined;
  readonly stt: SttProvider | undefined;
  readonly tts: TtsProvider | undefined;
  readonly realtime: { provider: RealtimeProvider; model: string; voice: string; threshold: number | null } | undefined;
  readonly functions: readonly FunctionDefinition[];
  readonly functionContext: FunctionContext;
  /** `knowledgebase_mode: prompt` (pipeline): passages for each caller turn go into that turn's system prompt. */
  readonly promptKnowledgebaseId?: number;
  /** The assistant's built-in tools, made once per call (the calendar caches its owner). */
  readonly builtins: readonly Builtin[];
  /** The carrier said who answered (`AnsweredBy`), when it knows. */
  answeredBy: 'human' | 'machine' | 'unknown' | null;
}

export interface CallEnd {
  readonly status: string;
  readonly failure: string | undefined;
  readonly transcript: string;
  readonly answeredAt: number | null;
  readonly endedAt: number;
  readonly durationSeconds: number;
  readonly answeredBy: 'human' | 'machine' | 'unknown' | null;
}

export interface SessionHooks {
  /** Every status the call enters, in order. */
  status(status: string, at: number): void;
  /** The call ended; called once. */
  ended(end: CallEnd): void;
  /** Transfer the live call to a number (the carrier redirects it). */
  transfer(number: string): Promise<void>;
  /** Milliseconds from the caller's last speech frame to the agent's first audio frame, less the end-of-turn silence. */
  voiceToVoice?(ms: number): void;
  turn?(): void;
  interruption?(): void;
  /** The agent paused for the caller's sound and went on: it was no interruption (a backchannel, a cough). */
  resumed?(): void;
  /** Every frame the agent sent (speech, ambient or both), for the recording. */
  agentFrame?(frame: Int16Array): void;
  /** How late (ms) a frame of the agent's speech left against its 20 ms schedule. */
  frameLateness?(ms: number): void;
  /** Time to the first token of the text model, per round. */
  firstByte?(kind: 'llm', provider: string, ms: number): void;
  /**
   * A turn went into the transcript: what the caller said, or what the caller heard of the agent;
   * `startedAt` and `endedAt` by the clock (the caller's first and last speech; the agent's first
   * audio and the end of its response).
   */
  said?(turn: { role: 'user' | 'assistant'; text: string; startedAt: number; endedAt: number }): void;
  /** The agent paused for the caller's sound; `resumed` or `interruption` follows. */
  paused?(): void;
  /** A tool the model called has run (`ms` by the clock); `error` when it failed or reported a failure. */
  toolCall?(call: { name: string; ms: number; error: string | undefined }): void;
}

export interface Language {
  readonly code: string;
  readonly name: string;
  readonly voice: string;
}
