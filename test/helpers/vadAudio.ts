import { readFileSync } from 'node:fs';
import { FRAME_SAMPLES, SAMPLE_RATE, Upsampler, mulawDecode, random } from '../../runtime/voice/audio.js';
import { concat as joinAudio } from '../../bench/corpus/build.js';

/**
 * Audio for the VAD tests and benchmark, as 16 kHz PCM16: the checked-in speech clips
 * (`test/fixtures/speech`, espeak-ng through the phone band) and synthetic sounds made from a
 * seeded generator, so every run hears the same samples.
 */

const FIXTURES = new URL('../fixtures/speech/', import.meta.url);

/** A checked-in clip (8 kHz mu-law) at 16 kHz. */
export function speechClip(name: 'booking-en' | 'confirm-en-f' | 'termin-de'): Int16Array {
  const bytes = readFileSync(new URL(`${name}.ul`, FIXTURES));
  return new Upsampler().process(mulawDecode(bytes)).slice();
}

const samplesOf = (ms: number) => Math.round((SAMPLE_RATE * ms) / 1000);
const clip = (value: number) => Math.max(-32_768, Math.min(32_767, Math.round(value)));

export function silence(ms: number): Int16Array {
  return new Int16Array(samplesOf(ms));
}

/** White noise at `amplitude` (of full scale, peak). */
export function whiteNoise(ms: number, amplitude: number, seed = 1): Int16Array {
  const next = random(seed);
  return Int16Array.from({ length: samplesOf(ms) }, () => clip((next() * 2 - 1) * amplitude * 32_767));
}

/** A sine tone with 10 ms ramps. */
export function tone(ms: number, hz: number, amplitude: number): Int16Array {
  const ramp = samplesOf(10);
  const n = samplesOf(ms);
  return Int16Array.from({ length: n }, (_, i) => clip(Math.sin((2 * Math.PI * hz * i) / SAMPLE_RATE) * amplitude * 32_767 * Math.min(1, i / ramp, (n - i) / ramp)));
}

/** A cough-like burst: noise with a sharp attack, low-passed, decaying over `ms`. */
export function cough(ms: number, amplitude: number, seed = 2): Int16Array {
  const next = random(seed);
  const n = samplesOf(ms);
  let low = 0;
  return Int16Array.from({ length: n }, (_, i) => {
    low += 0.35 * (next() * 2 - 1 - low);
    return clip(low * 3 * amplitude * 32_767 * Math.exp((-4 * i) / n) * Math.min(1, i / samplesOf(5)));
  });
}

/**
 * Voiced speech-like sound: a glottal pulse train (pitch gliding 110-140 Hz) through three
 * formant resonators, with vowels changing every 150 ms and syllable-rate loudness.
 */
export function voiced(ms: number, amplitude: number): Int16Array {
  const vowels = [
    [730, 1090, 2440],
    [270, 2290, 3010],
    [530, 1840, 2480],
    [300, 870, 2240],
  ];
  const n = samplesOf(ms);
  const out = new Float64Array(n);
  const resonators = [0, 1, 2].map(() => ({ y1: 0, y2: 0 }));
  let phase = 0;
  for (let i = 0; i < n; i++) {
    const t = i / SAMPLE_RATE;
    const pitch = 125 + 15 * Math.sin(2 * Math.PI * 0.7 * t);
    phase += pitch / SAMPLE_RATE;
    const pulse = phase >= 1 ? 1 : 0;
    if (phase >= 1) phase -= 1;
    const formants = vowels[Math.floor(t / 0.15) % vowels.length]!;
    let sample = 0;
    formants.forEach((f, k) => {
      const r = Math.exp((-Math.PI * 80) / SAMPLE_RATE);
      const a1 = 2 * r * Math.cos((2 * Math.PI * f) / SAMPLE_RATE);
      const a2 = -r * r;
      const state = resonators[k]!;
      const y = pulse + a1 * state.y1 + a2 * state.y2;
      state.y2 = state.y1;
      state.y1 = y;
      sample += y / (k + 1);
    });
    out[i] = sample * (0.6 + 0.4 * Math.sin(2 * Math.PI * 4 * t) ** 2);
  }
  const peak = out.reduce((m, v) => Math.max(m, Math.abs(v)), 0) || 1;
  return Int16Array.from(out, (v) => clip((v / peak) * amplitude * 32_767));
}

/** Pieces one after another (the corpus builder's join). */
export const concat = (...pieces: Int16Array[]): Int16Array => joinAudio(pieces);

/** `signal` with `noise` added under it (the noise repeats if shorter). */
export function mix(signal: Int16Array, noise: Int16Array): Int16Array {
  return Int16Array.from(signal, (s, i) => clip(s + noise[i % noise.length]!));
}

/** The 20 ms frames of `audio` (a partial last frame is dropped). */
export function frames(audio: Int16Array): Int16Array[] {
  const out: Int16Array[] = [];
  for (let i = 0; i + FRAME_SAMPLES <= audio.length; i += FRAME_SAMPLES) out.push(audio.subarray(i, i + FRAME_SAMPLES));
  return out;
}
