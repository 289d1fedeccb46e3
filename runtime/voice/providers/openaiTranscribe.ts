import type { SpeechVendors } from '../../config.js';
import type { Logger } from '../../logger.js';
import { FRAME_MS, SAMPLE_RATE, samplesToBytes, wavHeader } from '../audio.js';
import type { FirstByteProbe, SttOptions, SttProvider, SttStream } from './types.js';
import { callLanguage, SegmentedTranscript, SpeechGate, type Segment } from './utterance.js';
import { TranscriptionFailed } from './wire.js';

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

/** Where the `openai` transcriber's requests go: `{url}/audio/transcriptions`, with the key as a bearer token when there is one. */
export function openaiTranscription(vendor: NonNullable<SpeechVendors['openaiTranscribe']>): BatchTranscriberSettings {
  const headers: Record<string, string> = vendor.apiKey ? { authorization: `Bearer ${vendor.apiKey}` } : {};
  return { name: 'openai', endpoint: `${vendor.url}/audio/transcriptions`, headers, model: vendor.model };
}

/** An Azure OpenAI deployment speaks the same `/audio/transcriptions`, under its own URL, with an `api-key` header. */
export function azureTranscription(vendor: NonNullable<SpeechVendors['azureTranscribe']>): BatchTranscriberSettings {
  const endpoint = `${vendor.endpoint}/openai/deployments/${encodeURIComponent(vendor.deployment)}/audio/transcriptions?api-version=${encodeURIComponent(vendor.apiVersion)}`;
  return { name: 'azure', endpoint, headers: { 'api-key': vendor.apiKey }, model: vendor.deployment };
}

/**
 * One `POST /audio/transcriptions` of `file` (its `type` the part's content type, `filename` its
 * name, whose extension the server reads the format from). With one expected language it is sent;
 * with several the server detects it (a Whisper model is asked for `verbose_json`, which names it).
 * @throws TranscriptionFailed when the server answers an error status (the vendor's error code kept, never its message)
 */
export async function requestTranscription(settings: BatchTranscriberSettings, file: Blob, filename: string, languages: readonly string[], signal?: AbortSignal): Promise<{ text: string; language?: string }> {
  const timeout = AbortSignal.timeout(settings.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const detect = languages.length > 1;
  const form = new FormData();
  form.append('file', file, filename);
  form.append('model', settings.model);
  if (!detect && languages[0]) form.append('language', languages[0]);
  // Whisper models answer `verbose_json` with the language they heard; OpenAI's gpt-4o models refuse it.
  form.append('response_format', detect && /whisper/i.test(settings.model) ? 'verbose_json' : 'json');
  const response = await fetch(settings.endpoint, { method: 'POST', headers: settings.headers, body: form, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  const body = (await response.json().catch(() => undefined)) as { text?: unknown; language?: unknown; error?: { code?: unknown; type?: unknown } } | undefined;
  if (!response.ok) {
    // Only the vendor's error code is kept: its message may quote the key it refused.
    const code = body?.error?.code ?? body?.error?.type;
    throw new TranscriptionFailed(settings.name, response.status, typeof code === 'string' ? code : undefined);
  }
  if (typeof body?.text !== 'string') throw new Error('the transcription answer has no text');
  const language = callLanguage(body.language, languages);
  return { text: body.text, ...(language ? { language } : {}) };
}

export function createBatchStt(settings: BatchTranscriberSettings, logger: Logger, probe?: FirstByteProbe): SttProvider {
  const timeoutMs = settings.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const transcribe = (samples: Int16Array, languages: readonly string[], signal: AbortSignal) =>
    requestTranscription(settings, new Blob([wavFile(samples)], { type: 'audio/wav' }), 'utterance.wav', languages, signal);

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
