import { FRAME_SAMPLES, allocSamples } from '../../runtime/voice/audio.js';

/**
 * The noise suppressor as first written (`runtime/voice/hearing/denoise.ts` before its FFTs were
 * shared between hops): each 10 ms hop on its own, a forward and an inverse 512-point radix-2
 * complex FFT per hop. Kept only as the reference the faster one must match sample for sample
 * (within 1 LSB of rounding) and as the baseline of `npm run bench:denoise`.
 */

const HOP = FRAME_SAMPLES / 2;
const WINDOW = FRAME_SAMPLES;
const N = 512;
const BINS = N / 2 + 1;
const GAIN_FLOOR = 0.1;
/** Minimum statistics: the noise is the lowest smoothed power of the last 0.75-1.5 s, times a bias for the minimum's low estimate. */
const ROTATE_HOPS = 75;
const NOISE_BIAS = 8;

const window = new Float64Array(WINDOW);
for (let i = 0; i < WINDOW; i++) window[i] = Math.sqrt(0.5 - 0.5 * Math.cos((2 * Math.PI * (i + 0.5)) / WINDOW));

const bitReverse = new Uint16Array(N);
for (let i = 0, bits = Math.log2(N); i < N; i++) {
  let reversed = 0;
  for (let b = 0; b < bits; b++) reversed |= ((i >> b) & 1) << (bits - 1 - b);
  bitReverse[i] = reversed;
}
const cosTable = new Float64Array(N / 2);
const sinTable = new Float64Array(N / 2);
for (let i = 0; i < N / 2; i++) {
  cosTable[i] = Math.cos((2 * Math.PI * i) / N);
  sinTable[i] = Math.sin((2 * Math.PI * i) / N);
}

/** In-place radix-2 FFT (inverse when `inverse`, unscaled). */
function fft(re: Float64Array, im: Float64Array, inverse: boolean): void {
  for (let i = 0; i < N; i++) {
    const j = bitReverse[i]!;
    if (j > i) {
      let t = re[i]!;
      re[i] = re[j]!;
      re[j] = t;
      t = im[i]!;
      im[i] = im[j]!;
      im[j] = t;
    }
  }
  const sign = inverse ? 1 : -1;
  for (let size = 2; size <= N; size <<= 1) {
    const half = size >> 1;
    const step = N / size;
    for (let start = 0; start < N; start += size) {
      for (let k = 0; k < half; k++) {
        const c = cosTable[k * step]!;
        const s = sign * sinTable[k * step]!;
        const a = start + k;
        const b = a + half;
        const tr = re[b]! * c - im[b]! * s;
        const ti = re[b]! * s + im[b]! * c;
        re[b] = re[a]! - tr;
        im[b] = im[a]! - ti;
        re[a] = re[a]! + tr;
        im[a] = im[a]! + ti;
      }
    }
  }
}

export class ReferenceNoiseSuppressor {
  private readonly history = new Float64Array(WINDOW);
  private readonly overlap = new Float64Array(HOP);
  private readonly noise = new Float64Array(BINS);
  private readonly smoothed = new Float64Array(BINS);
  private readonly minCurrent = new Float64Array(BINS).fill(Infinity);
  private readonly minPrevious = new Float64Array(BINS).fill(Infinity);
  private readonly previousGain = new Float64Array(BINS).fill(1);
  private readonly previousPower = new Float64Array(BINS);
  private readonly re = new Float64Array(N);
  private readonly im = new Float64Array(N);
  private readonly hopOut = new Float64Array(HOP);
  private frames = 0;

  /** Cleans one 20 ms frame (320 samples); returns a new frame. */
  process(frame: Int16Array): Int16Array {
    const out = allocSamples(frame.length);
    for (let hop = 0; hop < 2; hop++) {
      this.history.copyWithin(0, HOP);
      for (let i = 0; i < HOP; i++) this.history[HOP + i] = (frame[hop * HOP + i] ?? 0) / 32_768;
      const cleaned = this.hop();
      for (let i = 0; i < HOP; i++) {
        const value = Math.round(cleaned[i]! * 32_768);
        out[hop * HOP + i] = value > 32_767 ? 32_767 : value < -32_768 ? -32_768 : value;
      }
    }
    return out;
  }

  private hop(): Float64Array {
    const { re, im, noise, previousGain, previousPower } = this;
    re.fill(0);
    im.fill(0);
    for (let i = 0; i < WINDOW; i++) re[i] = this.history[i]! * window[i]!;
    fft(re, im, false);
    this.frames++;
    if (this.frames % ROTATE_HOPS === 0) {
      this.minPrevious.set(this.minCurrent);
      this.minCurrent.fill(Infinity);
    }
    const { smoothed, minCurrent, minPrevious } = this;
    for (let k = 0; k < BINS; k++) {
      const power = re[k]! * re[k]! + im[k]! * im[k]!;
      smoothed[k] = this.frames === 1 ? power : 0.5 * smoothed[k]! + 0.5 * power;
      if (smoothed[k]! < minCurrent[k]!) minCurrent[k] = smoothed[k]!;
      noise[k] = Math.min(minCurrent[k]!, minPrevious[k]!);
      const floor = NOISE_BIAS * noise[k]! + 1e-12;
      const posterior = power / floor;
      const prior = 0.98 * ((previousGain[k]! * previousGain[k]! * previousPower[k]!) / floor) + 0.02 * Math.max(0, posterior - 1);
      let gain = prior / (1 + prior);
      if (gain < GAIN_FLOOR) gain = GAIN_FLOOR;
      previousGain[k] = gain;
      previousPower[k] = power;
      re[k] = re[k]! * gain;
      im[k] = im[k]! * gain;
      if (k > 0 && k < N / 2) {
        re[N - k] = re[k]!;
        im[N - k] = -im[k]!;
      }
    }
    fft(re, im, true);
    const result = this.hopOut;
    for (let i = 0; i < HOP; i++) result[i] = this.overlap[i]! + (re[i]! / N) * window[i]!;
    for (let i = 0; i < HOP; i++) this.overlap[i] = (re[HOP + i]! / N) * window[HOP + i]!;
    return result;
  }
}
