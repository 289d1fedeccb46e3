import type { Logger } from '../../logger.js';
import { FRAME_MS, SAMPLE_RATE, samplesToBytes, wavHeader } from '../audio.js';
import type { FirstByteProbe, SttOptions, SttProvider, SttStream } from './types.js';
import { callLanguage, SegmentedTranscript, SpeechGate, type Segment } from './utterance.js';

/**
 * Batch transcription over OpenAI's `POST /audio/transcriptions` (multipart: `file` a 16 kHz mono
 * PCM16 WAV, `model`, `language`, `response_format=json` answering `{text}`), which OpenAI,
 * Azure OpenAI (a deployment's URL, `api-key`), Speaches, whisper.cpp's server, vLLM and LocalAI
 * all accept. Each utterance is sent once, when hearing ends the caller's turn (`finalize`): from
 * `PRE_ROLL_MS` before the VAD's onset to `TAIL_MS` after its last speech frame. There are no
 * interim transcripts (an utterance longer than `MAX_UTTERANCE_MS` is sent in pieces, each
 * piece's words an interim one). A request that fails is logged and leaves its utterance without
 * words: the call goes on.
 */

export interface BatchTranscriberSettings {
  /** Catalog code, in logs and metrics (`openai`, `azure`). */
  readonly name: string;
  /** Where requests go: `{base}/audio/transcriptions`, or an Azure deployment's URL with its `api-version`. */
  readonly endpoint: string;
  /** Authentication (`authorization: Bearer …` or Azure's `api-key`); none for a keyless server. */
  readonly headers: Readonly<Record<string, string>>;
  readonly model: string;
  /** A request taking longer is given up (its utterance stays without words). @defaultValue 5 000 ms */
  readonly timeoutMs?: number;
}

/** Silence kept after the utterance's last speech frame (the rest of the end-of-turn silence is not sent). */
export const TAIL_MS = 200;
/** Longer speech is sent in pieces this long, so no request outgrows a server's upload limit. */
export const MAX_UTTERANCE_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 5_000;

/** A 16 kHz mono PCM16 WAV file of `samples`. */
export function wavFile(samples: Int16Array): Buffer {
  return Buffer.concat([wavHeader(samples.byteLength, 1, SAMPLE_RATE), samplesToBytes(samples)]);
}

class TranscriptionFailed extends Error {
  override readonly name = 'TranscriptionFailed';
  constructor(readonly status: number, readonly code: string | undefined) {
    super(`the transcription request answered HTTP ${status}${code ? ` (${code})` : ''}`);
  }
}

export function createBatchStt(settings: BatchTranscriberSettings, logger: Logger, probe?: FirstByteProbe): SttProvider {
  const timeoutMs = settings.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  /** Whisper models answer `verbose_json` with the language they heard; OpenAI's gpt-4o models refuse it. */
  const reportsLanguage = /whisper/i.test(settings.model);

  async function transcribe(samples: Int16Array, languages: readonly string[], signal: AbortSignal): Promise<{ text: string; language?: string }> {
    const detect = languages.length > 1;
    const form = new FormData();
    form.append('file', new Blob([wavFile(samples)], { type: 'audio/wav' }), 'utterance.wav');
    form.append('model', settings.model);
    if (!detect && languages[0]) form.append('language', languages[0]);
    form.append('response_format', detect && reportsLanguage ? 'verbose_json' : 'json');
    const response = await fetch(settings.endpoint, { method: 'POST', headers: settings.headers, body: form, signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) });
    const body = (await response.json().catch(() => undefined)) as { text?: unknown; language?: unknown; error?: { code?: unknown; type?: unknown } } | undefined;
    if (!response.ok) {
      // Only the vendor's error code is kept: its message may quote the key it refused.
      const code = body?.error?.code ?? body?.error?.type;
      throw new TranscriptionFailed(response.status, typeof code === 'string' ? code : undefined);
    }
    if (typeof body?.text !== 'string') throw new Error('the transcription answer has no text');
    const language = callLanguage(body.language, languages);
    return { text: body.text, ...(language ? { language } : {}) };
  }

  return {
    name: settings.name,
    // The request only starts once the turn is over, and takes its time: hearing waits for it a little longer than it may take.
    finalWaitMs: timeoutMs + 1_000,
    open(options: SttOptions): SttStream {
      const gate = new SpeechGate();
      const transcript = new SegmentedTranscript((t) => options.onTranscript(t));
      const stopped = new AbortController();
      let frames: Int16Array[] = [];
      /** Frames up to and including the last speech frame. */
      let spoken = 0;

      const send = () => {
        const tail = Math.min(frames.length, spoken + TAIL_MS / FRAME_MS);
        const samples = new Int16Array(tail * (frames[0]?.length ?? 0));
        frames.slice(0, tail).forEach((frame, i) => samples.set(frame, i * frame.length));
        frames = [];
        spoken = 0;
        const segment: Segment = transcript.segment();
        const started = performance.now();
        transcribe(samples, options.languages, stopped.signal).then(
          (result) => {
            probe?.('stt', settings.name, performance.now() - started);
            if (!stopped.signal.aborted) transcript.update(segment, result.text, true, result.language);
          },
          (error: unknown) => {
            if (stopped.signal.aborted) return;
            const failure = error instanceof TranscriptionFailed ? { status: error.status, code: error.code } : { err: error };
            logger.warn({ callId: options.callId, provider: settings.name, ...failure }, 'transcription request failed; the utterance has no words');
            transcript.update(segment, '', true);
          },
        );
      };

      return {
        write(frame, speech) {
          if (stopped.signal.aborted) return;
          for (const passed of gate.pass(frame, speech)) frames.push(passed);
          if (speech && gate.passing) spoken = frames.length;
          if (frames.length * FRAME_MS < MAX_UTTERANCE_MS) return;
          if (spoken > 0) send();
          else frames = [];
        },
        finalize() {
          if (stopped.signal.aborted) return;
          if (spoken > 0) send();
          frames = [];
          spoken = 0;
          gate.close();
          // Not at once: hearing starts waiting for the final just after asking for it.
          queueMicrotask(() => transcript.finalize());
        },
        close() {
          stopped.abort();
        },
      };
    },
  };
}
