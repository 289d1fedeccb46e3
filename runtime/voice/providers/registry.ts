import type { Config, SpeechVendors } from '../../config.js';
import type { Logger } from '../../logger.js';
import { createDeepgramStt } from './deepgram.js';
import { createDevRealtime, createDevStt, createDevTts, type DevTtsOptions, type TranscriptScript } from './dev.js';
import { createElevenLabsTts } from './elevenlabs.js';
import { createOpenAiRealtime } from './openaiRealtime.js';
import { createOpenAiRealtimeStt } from './openaiRealtimeStt.js';
import { azureTranscription, createBatchStt, openaiTranscription } from './openaiTranscribe.js';
import { createOpenAiTts } from './openaiTts.js';
import type { FirstByteProbe, RealtimeProvider, SttProvider, TtsProvider } from './types.js';

/**
 * Which adapter serves a catalog speech provider or realtime model: the vendor's when its key is
 * configured, else the `dev` provider (logged once per provider, so a missing key is visible).
 * Tests and benchmarks may replace any of them. This is the one place that maps a provider's
 * catalog code to its adapter; each vendor's wire protocol is a file of its own beside it.
 */

export interface SpeechOverrides {
  readonly stt?: SttProvider;
  readonly tts?: TtsProvider;
  readonly realtime?: RealtimeProvider;
  /** Scripted transcripts for the dev transcriber and dev realtime model. */
  readonly transcripts?: TranscriptScript;
}

export interface SpeechAdapters {
  readonly stt: Readonly<Record<string, () => SttProvider>>;
  readonly tts: Readonly<Record<string, () => TtsProvider>>;
  readonly realtime: Readonly<Record<string, () => RealtimeProvider>>;
}

/** The vendor adapters that have keys configured, by catalog provider code. */
export function speechAdapters(vendors: SpeechVendors, logger: Logger, probe?: FirstByteProbe): SpeechAdapters {
  const { deepgram, elevenlabs, openai, openaiTranscribe, azureTranscribe } = vendors;
  return {
    stt: {
      ...(deepgram ? { deepgram: () => createDeepgramStt(deepgram, probe) } : {}),
      ...(openaiTranscribe ? { openai: () => openaiStt(openaiTranscribe, logger, probe) } : {}),
      ...(azureTranscribe ? { azure: () => createBatchStt(azureTranscription(azureTranscribe), logger, probe) } : {}),
    },
    tts: {
      ...(elevenlabs ? { elevenlabs: () => createElevenLabsTts(elevenlabs, probe) } : {}),
      ...(openai ? { openai: () => createOpenAiTts(openai, probe) } : {}),
    },
    realtime: openai ? { openai: () => createOpenAiRealtime(openai, probe) } : {},
  };
}

function openaiStt(settings: NonNullable<SpeechVendors['openaiTranscribe']>, logger: Logger, probe?: FirstByteProbe): SttProvider {
  if (settings.mode === 'realtime') return createOpenAiRealtimeStt({ realtimeUrl: settings.realtimeUrl, model: settings.model, ...(settings.apiKey ? { apiKey: settings.apiKey } : {}) }, logger, probe);
  return createBatchStt(openaiTranscription(settings), logger, probe);
}

/** `dev`: what the dev synthesizer speaks with (see `createDevTts`). */
export function createSpeechRegistry(_config: Config, logger: Logger, adapters: SpeechAdapters, overrides: SpeechOverrides = {}, dev: DevTtsOptions = {}) {
  const devStt = createDevStt(overrides.transcripts);
  const devTts = createDevTts(dev);
  const devRealtime = createDevRealtime(overrides.transcripts, { tts: devTts, speaks: dev.synthesizer !== undefined });
  const cache = new Map<string, SttProvider | TtsProvider | RealtimeProvider>();
  const warned = new Set<string>();
  function pick<T>(kind: string, code: string, table: Readonly<Record<string, () => T>>, dev: T): T {
    if (code === 'dev') return dev;
    const key = `${kind}:${code}`;
    const cached = cache.get(key);
    if (cached) return cached as T;
    const make = table[code];
    if (!make) {
      if (!warned.has(key)) {
        warned.add(key);
        logger.warn({ kind, provider: code }, 'speech provider not configured; the dev provider serves it');
      }
      return dev;
    }
    const made = make();
    cache.set(key, made as never);
    return made;
  }
  return {
    stt: (code: string): SttProvider => overrides.stt ?? pick('transcriber', code, adapters.stt, devStt),
    tts: (code: string): TtsProvider => overrides.tts ?? pick('synthesizer', code, adapters.tts, devTts),
    realtime: (provider: string): RealtimeProvider => overrides.realtime ?? pick('realtime', provider, adapters.realtime, devRealtime),
  };
}

export type SpeechRegistry = ReturnType<typeof createSpeechRegistry>;
