import { FRAME_SAMPLES, SAMPLE_RATE, levelDb } from '../../runtime/voice/audio.js';

export { concat as concatSamples } from '../../bench/corpus/build.js';

/**
 * What tells spoken words from a tone in PCM16 16 kHz audio, without a recogniser: speech
 * alternates voiced sounds (few zero crossings) with fricatives such as "s" and "f" (many), so the
 * zero-crossing rate of its loud 20 ms frames varies widely and some frames cross more than once
 * every five samples; a periodic buzz keeps one low rate.
 */

export interface SpeechStats {
  readonly seconds: number;
  /** 20 ms frames above -40 dBFS. */
  readonly loudFrames: number;
  /** Coefficient of variation of the loud frames' zero-crossing rates. */
  readonly crossingVariation: number;
  /** Loud frames with more than one zero crossing per five samples (fricatives). */
  readonly fricativeFrames: number;
}

export function speechStats(samples: Int16Array): SpeechStats {
  const rates: number[] = [];
  for (let offset = 0; offset + FRAME_SAMPLES <= samples.length; offset += FRAME_SAMPLES) {
    const frame = samples.subarray(offset, offset + FRAME_SAMPLES);
    if (levelDb(frame) < -40) continue;
    let crossings = 0;
    for (let i = 1; i < frame.length; i++) if (frame[i]! >= 0 !== frame[i - 1]! >= 0) crossings++;
    rates.push(crossings / frame.length);
  }
  const mean = rates.reduce((sum, rate) => sum + rate, 0) / Math.max(1, rates.length);
  const spread = Math.sqrt(rates.reduce((sum, rate) => sum + (rate - mean) ** 2, 0) / Math.max(1, rates.length));
  return { seconds: samples.length / SAMPLE_RATE, loudFrames: rates.length, crossingVariation: mean === 0 ? 0 : spread / mean, fricativeFrames: rates.filter((rate) => rate > 0.2).length };
}

/** The fields of a canonical 44-byte-header PCM WAV, and its samples (mono). */
export function readWav(bytes: Buffer): { riff: string; wave: string; format: number; channels: number; sampleRate: number; bits: number; dataBytes: number; samples: Int16Array } {
  const dataBytes = bytes.readUInt32LE(40);
  return {
    riff: bytes.toString('ascii', 0, 4),
    wave: bytes.toString('ascii', 8, 12),
    format: bytes.readUInt16LE(20),
    channels: bytes.readUInt16LE(22),
    sampleRate: bytes.readUInt32LE(24),
    bits: bytes.readUInt16LE(34),
    dataBytes,
    samples: new Int16Array(new Uint8Array(bytes.subarray(44, 44 + dataBytes)).buffer),
  };
}
