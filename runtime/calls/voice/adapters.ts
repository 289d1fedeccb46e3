import type { SpeechVendors } from '../../config.js';
import type { SpeechAdapters } from './registry.js';

/** The vendor adapters that have keys configured, by catalog provider code. */
export function speechAdapters(_vendors: SpeechVendors): SpeechAdapters {
  return { stt: {}, tts: {}, realtime: {} };
}
