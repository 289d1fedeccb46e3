import type { AssistantRow } from '../../assistants/repository.js';
import type { CatalogService } from '../../catalog/service.js';
import type { SpeechVendors } from '../../config.js';
import type { Logger } from '../../logger.js';
import { DEEPGRAM_MODEL, deepgramLanguage } from './deepgram.js';
import { azureTranscription, openaiTranscription, requestTranscription, type BatchTranscriberSettings } from './openaiTranscribe.js';
import { objectOr, TranscriptionFailed } from './wire.js';

/**
 * Transcribes a recorded audio file (a customer's voice message on a messaging channel) with the
 * transcriber that hears the assistant's calls (`Catalog.transcriberCode`), in the assistant's
 * languages:
 * - `openai`, `azure`: the file as it came, in one `POST /audio/transcriptions` (OpenAI reads
 *   ogg/opus, mp3, mp4/m4a, wav, webm and flac; aac and amr only on servers that decode them).
 * - `deepgram`: its pre-recorded API, `POST /v1/listen` with the file as the body.
 * - `dev`, or a vendor without credentials: nothing (the caller says the assistant reads text only).
 */

export interface AudioFile {
  readonly bytes: Buffer;
  /** As the channel gave it, parameters included (`audio/ogg; codecs=opus`). */
  readonly mimeType: string;
}

/**
 * @returns the words heard, trimmed; undefined when no transcriber can take a file for the
 * assistant or nothing was heard.
 * @throws TranscriptionFailed when the vendor answers an error status or nothing within
 * the time limit (its message has the status, never a key).
 */
export type FileTranscriber = (assistant: AssistantRow, audio: AudioFile) => Promise<string | undefined>;

export interface FileTranscriberDeps {
  readonly speech: SpeechVendors;
  readonly catalog: CatalogService;
  readonly logger: Logger;
  /** A request taking longer is given up (tests shorten it). @defaultValue FILE_TRANSCRIPTION_TIMEOUT_MS */
  readonly timeoutMs?: number;
}

/** A voice message is short, but an upload and a vendor's queue take their time. */
export const FILE_TRANSCRIPTION_TIMEOUT_MS = 30_000;

/** File name extensions by media type: OpenAI-compatible servers tell the format by the name. */
const EXTENSIONS: Readonly<Record<string, string>> = {
  'audio/ogg': 'ogg',
  'audio/opus': 'ogg',
  'audio/mpeg': 'mp3',
  'audio/mp3': 'mp3',
  'audio/mp4': 'm4a',
  'audio/m4a': 'm4a',
  'audio/x-m4a': 'm4a',
  'audio/aac': 'aac',
  'audio/amr': 'amr',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/wave': 'wav',
  'audio/webm': 'webm',
  'audio/flac': 'flac',
};

/** `voice-message.ogg` for `audio/ogg; codecs=opus`; an unknown type keeps its subtype as the extension. */
export function audioFilename(mimeType: string): string {
  const type = mimeType.split(';')[0]!.trim().toLowerCase();
  const subtype = /^[a-z]+\/(?:x-)?([a-z0-9]+)$/.exec(type)?.[1];
  return `voice-message.${EXTENSIONS[type] ?? subtype ?? 'bin'}`;
}

export function createFileTranscriber({ speech, catalog, logger, timeoutMs = FILE_TRANSCRIPTION_TIMEOUT_MS }: FileTranscriberDeps): FileTranscriber {
  const { openaiTranscribe, azureTranscribe, deepgram } = speech;
  const batch = (settings: BatchTranscriberSettings) => ({ ...settings, timeoutMs });
  const vendors: Readonly<Record<string, (audio: AudioFile, languages: readonly string[]) => Promise<string>>> = {
    ...(openaiTranscribe ? { openai: viaTranscriptions(batch(openaiTranscription(openaiTranscribe))) } : {}),
    ...(azureTranscribe ? { azure: viaTranscriptions(batch(azureTranscription(azureTranscribe))) } : {}),
    ...(deepgram ? { deepgram: (audio: AudioFile, languages: readonly string[]) => deepgramPrerecorded(deepgram, audio, languages, timeoutMs) } : {}),
  };
  const warned = new Set<string>();

  return async (assistant, audio) => {
    const current = await catalog.get();
    const provider = current.transcriberCode(assistant);
    const transcribe = vendors[provider];
    if (!transcribe) {
      if (provider !== 'dev' && !warned.has(provider)) {
        warned.add(provider);
        logger.warn({ provider }, 'transcriber not configured; voice messages are not transcribed');
      }
      return undefined;
    }
    const languages = [assistant.language_id, ...assistant.secondary_language_ids].flatMap((id) => current.languages.get(id)?.iso_2 ?? []);
    try {
      const text = (await transcribe(audio, languages)).trim();
      return text === '' ? undefined : text;
    } catch (error) {
      // No answer in time, or none at all (a refused connection, a reset): fetch's own errors.
      if (error instanceof Error && error.name === 'TimeoutError') throw new TranscriptionFailed(provider, undefined, 'timeout', { cause: error });
      if (error instanceof TypeError && error.message === 'fetch failed') throw new TranscriptionFailed(provider, undefined, 'unreachable', { cause: error });
      throw error;
    }
  };
}

function viaTranscriptions(settings: BatchTranscriberSettings) {
  return async (audio: AudioFile, languages: readonly string[]): Promise<string> => {
    const file = new Blob([audio.bytes], { type: audio.mimeType });
    return (await requestTranscription(settings, file, audioFilename(audio.mimeType), languages)).text;
  };
}

/**
 * Deepgram's pre-recorded transcription: `POST {https origin}/v1/listen` with the file as the body
 * and its media type as `Content-Type`; the words are `results.channels[0].alternatives[0].transcript`.
 */
async function deepgramPrerecorded(settings: NonNullable<SpeechVendors['deepgram']>, audio: AudioFile, languages: readonly string[], timeoutMs: number): Promise<string> {
  // DEEPGRAM_URL is the streaming (WebSocket) origin; the pre-recorded API is served on the same host over HTTP.
  const origin = settings.url.replace(/^ws(s?):/, 'http$1:');
  const query = new URLSearchParams({ model: DEEPGRAM_MODEL, smart_format: 'true', language: deepgramLanguage(languages) });
  const response = await fetch(`${origin}/v1/listen?${query}`, {
    method: 'POST',
    headers: { authorization: `Token ${settings.apiKey}`, 'content-type': audio.mimeType },
    body: audio.bytes,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = objectOr(await response.json().catch(() => undefined));
  if (!response.ok) {
    // Only the error code: the message of an error may describe the credentials it refused.
    throw new TranscriptionFailed('deepgram', response.status, typeof body.err_code === 'string' ? body.err_code : undefined);
  }
  const channels = objectOr(body.results).channels;
  const alternatives = objectOr(Array.isArray(channels) ? channels[0] : undefined).alternatives;
  const transcript = objectOr(Array.isArray(alternatives) ? alternatives[0] : undefined).transcript;
  if (typeof transcript !== 'string') throw new Error('the Deepgram answer has no transcript');
  return transcript;
}
