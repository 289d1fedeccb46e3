import type { SpeechVendors } from '../../config.js';
import type { SpeechAdapters } from './registry.js';
import { createDeepgramStt, createElevenLabsTts, createOpenAiRealtime, createOpenAiTts, type FirstByteProbe } from './vendors.js';

/** The vendor adapters that have keys configured, by catalog provider code. */
export function speechAdapters(vendors: SpeechVendors, probe?: FirstByteProbe): SpeechAdapters {
  const { deepgram, elevenlabs, openai } = vendors;
  return {
    stt: deepgram ? { deepgram: () => createDeepgramStt(deepgram, probe) } : {},
    tts: {
      ...(elevenlabs ? { elevenlabs: () => createElevenLabsTts(elevenlabs, probe) } : {}),
      ...(openai ? { openai: () => createOpenAiTts(openai, probe) } : {}),
    },
    realtime: openai ? { openai: () => createOpenAiRealtime(openai, probe) } : {},
  };
}
