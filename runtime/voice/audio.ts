/**
 * The call's internal audio: PCM16 mono at 16 kHz in 20 ms frames (320 samples, 640 bytes).
 * Transports convert at the edge (Twilio: 8 kHz mu-law), so VAD, STT, TTS, mixing and recording
 * see one format. Everything here is allocation-light: it runs 50 times a second per call.
 */

export const SAMPLE_RATE = 16_000;
export const FRAME_MS = 20;
export const FRAME_SAMPLES = (SAMPLE_RATE * FRAME_MS) / 1000;
export const FRAME_BYTES = FRAME_SAMPLES * 2;

const MULAW_DECODE = new Int16Array(256);
const MULAW_ENCODE = new Uint8Array(65_536);

for (let i = 0; i < 256; i++) {
  const u = ~i & 0xff;
  let t = ((u & 0x0f) << 3) + 0x84;
  t <<= (u & 0x70) >> 4;
  MULAW_DECODE[i] = u & 0x80 ? 0x84 - t : t - 0x84;
}
for (let i = 0; i < 65_536; i++) {
  let sample = i - 32_768;
  const sign = sample < 0 ? 0x80 : 0;
  if (sign) sample = -sample;
  if (sample > 32_635) sample = 32_635;
  sample += 0x84;
  let exponent = 7;
  for (let mask = 0x4000; (sample & mask) === 0 && exponent > 0; exponent--, mask >>= 1);
  const mantissa = (sample >> (exponent + 3)) & 0x0f;
  MULAW_ENCODE[i] = ~(sign | (exponent << 4) | mantissa) & 0xff;
}

/** Sample arrays this small are carved from a shared slab (see `allocSamples`). */
const SLAB_BYTES = 64 * 1024;
const SLAB_MAX_SAMPLES = SLAB_BYTES / 16;
let slab = new ArrayBuffer(SLAB_BYTES);
let slabOffset = 0;

/**
 * A zeroed array of `samples` 16-bit samples. Frame-sized arrays are views into a shared 64 KB
 * slab (as Node pools small Buffers): a new typed array owns its own backing store, which costs
 * about 15 times a view and leaves the collector one more external buffer to sweep, 50 times a
 * second per call in each direction. The slab is never reused, so views start zeroed and stay
 * independent; a retained frame keeps its slab alive. Never transfer or index a view's `.buffer`.
 */
export function allocSamples(samples: number): Int16Array {
  if (samples > SLAB_MAX_SAMPLES) return new Int16Array(samples);
  const bytes = (samples * 2 + 7) & ~7;
  if (slabOffset + bytes > SLAB_BYTES) {
    slab = new ArrayBuffer(SLAB_BYTES);
    slabOffset = 0;
  }
  const out = new Int16Array(slab, slabOffset, samples);
  slabOffset += bytes;
  return out;
}

/** A copy of `samples` in a fresh array (from the slab when small). */
export function copySamples(samples: Int16Array): Int16Array {
  const out = allocSamples(samples.length);
  out.set(samples);
  return out;
}

export function mulawDecode(bytes: Uint8Array): Int16Array {
  const out = allocSamples(bytes.length);
  for (let i = 0; i < bytes.length; i++) out[i] = MULAW_DECODE[bytes[i]!]!;
  return out;
}

export function mulawEncode(samples: Int16Array): Buffer {
  const out = Buffer.allocUnsafe(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = MULAW_ENCODE[samples[i]! + 32_768]!;
  return out;
}

/** 8 kHz to 16 kHz by linear interpolation; keeps the last sample between frames. */
export class Upsampler {
  private previous = 0;
  process(input: Int16Array): Int16Array {
    const out = allocSamples(input.length * 2);
    let previous = this.previous;
    for (let i = 0; i < input.length; i++) {
      const sample = input[i]!;
      out[2 * i] = (previous + sample) >> 1;
      out[2 * i + 1] = sample;
      previous = sample;
    }
    this.previous = previous;
    return out;
  }

  /** 8 kHz mu-law bytes straight to 16 kHz samples (the Twilio inbound path), one array, no intermediate. */
  processMulaw(input: Uint8Array): Int16Array {
    const out = allocSamples(input.length * 2);
    let previous = this.previous;
    for (let i = 0; i < input.length; i++) {
      const sample = MULAW_DECODE[input[i]!]!;
      out[2 * i] = (previous + sample) >> 1;
      out[2 * i + 1] = sample;
      previous = sample;
    }
    this.previous = previous;
    return out;
  }
}

/** 16 kHz to 8 kHz with a [1 2 1]/4 low-pass before dropping every other sample. */
export class Downsampler {
  private previous = 0;
  process(input: Int16Array): Int16Array {
    const out = allocSamples(input.length >> 1);
    let previous = this.previous;
    for (let i = 0; i < out.length; i++) {
      const a = input[2 * i]!;
      const b = input[2 * i + 1]!;
      out[i] = (previous + 2 * a + b) >> 2;
      previous = b;
    }
    this.previous = previous;
    return out;
  }

  /** 16 kHz samples straight to 8 kHz mu-law bytes in `out` (the Twilio outbound path); returns the byte count. */
  toMulaw(input: Int16Array, out: Uint8Array): number {
    const length = Math.min(input.length >> 1, out.length);
    let previous = this.previous;
    for (let i = 0; i < length; i++) {
      const a = input[2 * i]!;
      const b = input[2 * i + 1]!;
      out[i] = MULAW_ENCODE[((previous + 2 * a + b) >> 2) + 32_768]!;
      previous = b;
    }
    this.previous = previous;
    return length;
  }
}

/** Root-mean-square level of a frame in dBFS (-100 for digital silence). */
export function levelDb(frame: Int16Array): number {
  let sum = 0;
  for (let i = 0; i < frame.length; i++) sum += frame[i]! * frame[i]!;
  if (sum === 0) return -100;
  return 10 * Math.log10(sum / frame.length / (32_768 * 32_768));
}

/** A PCM16 little-endian byte buffer as samples (copied when unaligned). */
export function bytesToSamples(bytes: Uint8Array): Int16Array {
  const even = bytes.length - (bytes.length % 2);
  if (bytes.byteOffset % 2 === 0) return new Int16Array(bytes.buffer, bytes.byteOffset, even / 2);
  return new Int16Array(new Uint8Array(bytes.subarray(0, even)).buffer);
}

export function samplesToBytes(samples: Int16Array): Buffer {
  return Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
}

/** Bytes of the canonical WAV header `wavHeader` writes. */
export const WAV_HEADER_BYTES = 44;

/** The 44-byte header of a PCM16 WAV file holding `dataBytes` of interleaved samples. */
export function wavHeader(dataBytes: number, channels: 1 | 2, rate = SAMPLE_RATE): Buffer {
  const out = Buffer.alloc(WAV_HEADER_BYTES);
  out.write('RIFF', 0, 'ascii');
  out.writeUInt32LE(36 + dataBytes, 4);
  out.write('WAVE', 8, 'ascii');
  out.write('fmt ', 12, 'ascii');
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20);
  out.writeUInt16LE(channels, 22);
  out.writeUInt32LE(rate, 24);
  out.writeUInt32LE(rate * 2 * channels, 28);
  out.writeUInt16LE(2 * channels, 32);
  out.writeUInt16LE(16, 34);
  out.write('data', 36, 'ascii');
  out.writeUInt32LE(dataBytes, 40);
  return out;
}

/** Adds `source × gain` into `target` with clipping. */
export function mixInto(target: Int16Array, source: Int16Array, gain = 1): void {
  const n = Math.min(target.length, source.length);
  for (let i = 0; i < n; i++) {
    const value = target[i]! + source[i]! * gain;
    target[i] = value > 32_767 ? 32_767 : value < -32_768 ? -32_768 : value;
  }
}

/** Cuts samples into whole 20 ms frames; the tail is padded with silence. */
export function toFrames(samples: Int16Array): Int16Array[] {
  const frames: Int16Array[] = [];
  for (let offset = 0; offset < samples.length; offset += FRAME_SAMPLES) {
    const frame = allocSamples(FRAME_SAMPLES);
    frame.set(samples.subarray(offset, Math.min(samples.length, offset + FRAME_SAMPLES)));
    frames.push(frame);
  }
  return frames;
}

/** A deterministic pseudo-random generator (mulberry32), so generated audio is the same every run. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * Speech-like audio for text: a voiced sound (a pitch contour with harmonics and syllable
 * rhythm) per word, about 65 ms per character at speed 1, with short gaps between words and
 * longer ones after punctuation. Never silent while there are words, so a listener can tell the
 * agent speaking from the agent silent.
 */
const WAVE_SIZE = 4096;
/** One period of the voiced waveform (a fundamental with three harmonics), looked up by phase. */
const VOICE_WAVE = Float32Array.from({ length: WAVE_SIZE }, (_, i) => {
  const phase = (2 * Math.PI * i) / WAVE_SIZE;
  return Math.sin(phase) + 0.5 * Math.sin(2 * phase) + 0.3 * Math.sin(3 * phase) + 0.15 * Math.sin(4 * phase);
});
const SINE = Float32Array.from({ length: WAVE_SIZE }, (_, i) => Math.sin((2 * Math.PI * i) / WAVE_SIZE));
const speechCache = new Map<string, Int16Array>();
const SPEECH_CACHE_ENTRIES = 256;

export function voicedSpeech(text: string, speed = 1, pitch = 150): Int16Array {
  const key = `${speed}|${pitch}|${text}`;
  const cached = speechCache.get(key);
  if (cached) return cached;
  const words = text.split(/\s+/).filter(Boolean);
  const msPerChar = 65 / speed;
  const gapMs = (word: string) => (/[.!?]$/.test(word) ? 220 : /[,;:]$/.test(word) ? 120 : 60);
  let totalMs = 0;
  for (const word of words) totalMs += Math.max(120, word.length * msPerChar) + gapMs(word);
  const out = new Int16Array(Math.ceil((totalMs * SAMPLE_RATE) / 1000));
  let offset = 0;
  let phase = 0;
  for (const [index, word] of words.entries()) {
    const length = Math.floor((Math.max(120, word.length * msPerChar) * SAMPLE_RATE) / 1000);
    const syllables = Math.max(1, Math.round(word.length / 3));
    let step = 0;
    let shape = 0;
    const syllableStep = (syllables * WAVE_SIZE) / (2 * length);
    for (let i = 0; i < length; i++) {
      if ((i & 15) === 0) {
        const t = i / SAMPLE_RATE;
        step = (pitch * (1 + 0.12 * Math.sin(2 * Math.PI * (0.7 + index * 0.13) * t + index)) * WAVE_SIZE) / SAMPLE_RATE;
        const ramp = i < 160 ? i / 160 : length - i < 320 ? (length - i) / 320 : 1;
        shape = ramp * (0.55 + 0.45 * Math.abs(SINE[((syllableStep * i) | 0) % WAVE_SIZE]!)) * 6_000;
      }
      phase += step;
      if (phase >= WAVE_SIZE) phase -= WAVE_SIZE;
      out[offset + i] = (VOICE_WAVE[phase | 0]! * shape) | 0;
    }
    offset += length + Math.floor((gapMs(word) * SAMPLE_RATE) / 1000);
  }
  if (speechCache.size >= SPEECH_CACHE_ENTRIES) speechCache.delete(speechCache.keys().next().value!);
  speechCache.set(key, out);
  return out;
}

const DTMF_ROWS = [697, 770, 852, 941];
const DTMF_COLUMNS = [1209, 1336, 1477, 1633];
const DTMF_KEYS = ['123A', '456B', '789C', '*0#D'];

/** The tone pair of one keypad key (0-9, *, #, A-D): 100 ms of tone then 60 ms of silence. */
export function dtmfTone(key: string, toneMs = 100, gapMs = 60): Int16Array {
  const row = DTMF_KEYS.findIndex((keys) => keys.includes(key.toUpperCase()));
  if (row === -1) throw new RangeError(`"${key}" is not a DTMF key`);
  const low = DTMF_ROWS[row]!;
  const high = DTMF_COLUMNS[DTMF_KEYS[row]!.indexOf(key.toUpperCase())]!;
  const tone = Math.floor((toneMs * SAMPLE_RATE) / 1000);
  const out = new Int16Array(tone + Math.floor((gapMs * SAMPLE_RATE) / 1000));
  for (let i = 0; i < tone; i++) {
    const t = i / SAMPLE_RATE;
    out[i] = Math.round((Math.sin(2 * Math.PI * low * t) + Math.sin(2 * Math.PI * high * t)) * 7_000);
  }
  return out;
}

export const DTMF_KEY_PATTERN = /^[0-9*#A-Da-d]+$/;

export type AmbientSound = 'office' | 'city' | 'forest' | 'crowded_room' | 'cafe' | 'nature';

const AMBIENT_SHAPES: Record<AmbientSound, { smoothing: number; modulation: number; seed: number; chirps: boolean }> = {
  office: { smoothing: 0.92, modulation: 0.3, seed: 1, chirps: false },
  city: { smoothing: 0.97, modulation: 0.15, seed: 2, chirps: false },
  forest: { smoothing: 0.6, modulation: 0.2, seed: 3, chirps: true },
  crowded_room: { smoothing: 0.85, modulation: 3.5, seed: 4, chirps: false },
  cafe: { smoothing: 0.88, modulation: 2.2, seed: 5, chirps: false },
  nature: { smoothing: 0.5, modulation: 0.1, seed: 6, chirps: true },
};
const ambientBeds = new Map<AmbientSound, Int16Array>();

/** A 4-second loop of generated background sound at full bed level (mixed in at the assistant's volume). */
export function ambientBed(kind: AmbientSound): Int16Array {
  let bed = ambientBeds.get(kind);
  if (bed) return bed;
  const shape = AMBIENT_SHAPES[kind];
  const rand = random(shape.seed);
  bed = new Int16Array(SAMPLE_RATE * 4);
  let low = 0;
  for (let i = 0; i < bed.length; i++) {
    low = shape.smoothing * low + (1 - shape.smoothing) * (rand() * 2 - 1);
    const t = i / SAMPLE_RATE;
    const swell = 0.6 + 0.4 * Math.sin(2 * Math.PI * shape.modulation * t) * Math.sin(2 * Math.PI * 0.25 * t);
    let value = (low / Math.sqrt(1 - shape.smoothing)) * swell * 2_000;
    if (shape.chirps && t % 1.3 < 0.08) value += Math.sin(2 * Math.PI * (3_000 + 2_000 * (t % 1.3)) * t) * 1_500;
    bed[i] = Math.max(-32_768, Math.min(32_767, Math.round(value)));
  }
  ambientBeds.set(kind, bed);
  return bed;
}
