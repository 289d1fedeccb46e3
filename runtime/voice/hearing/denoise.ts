import { FRAME_SAMPLES, allocSamples } from '../audio.js';

/**
 * Noise suppression for caller audio (`enable_noise_cancellation`), run before the VAD and the
 * transcriber: a short-time spectral Wiener filter. Each 20 ms frame is analysed in two 10 ms hops
 * with 20 ms sqrt-Hann windows (FFT 512); the noise spectrum is tracked per bin by minimum
 * statistics (the lowest smoothed power over the last 0.75-1.5 s: speech has pauses, steady noise
 * does not, so speech does not raise it and nothing is assumed about the first frames), and each bin is scaled by a
 * decision-directed Wiener gain with a floor of -20 dB so the rest sounds natural. Output lags
 * input by one hop (10 ms).
 *
 * Cost: the two hops of a frame share one forward and one inverse complex FFT (both hops' windows
 * are real, so one rides in the real part and the other in the imaginary part): about 35-45 µs
 * per frame on a loaded machine, 2.3 times less than with each hop's own FFTs
 * (`npm run bench:denoise`), so it stays on the event loop even at hundreds of calls (the RNNoise
 * WebAssembly build measured about 4.5 ms per 20 ms frame: 20 % of a core per call).
 * The output equals that of filtering each hop with its own FFTs (test/helpers/denoiseReference.ts)
 * within floating-point rounding: at most 1 LSB, on the few samples (about 0.3 % of noisy speech)
 * that land on an exact .5 before rounding.
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

/** The index pairs (i < j) that the bit-reversal permutation swaps, flattened. */
const bitReversalSwaps = (() => {
  const pairs: number[] = [];
  for (let i = 0, bits = Math.log2(N); i < N; i++) {
    let reversed = 0;
    for (let b = 0; b < bits; b++) reversed |= ((i >> b) & 1) << (bits - 1 - b);
    if (reversed > i) pairs.push(i, reversed);
  }
  return Uint16Array.from(pairs);
})();

/** Forward twiddles e^(-2πik/(2h)) of the stage with half-size h (4 <= h < N) at index h + k (k < h). */
const twiddleCos = new Float64Array(N);
const twiddleSin = new Float64Array(N);
for (let half = 4; half < N; half <<= 1) {
  for (let k = 0; k < half; k++) {
    twiddleCos[half + k] = Math.cos((Math.PI * k) / half);
    twiddleSin[half + k] = -Math.sin((Math.PI * k) / half);
  }
}

/**
 * In-place forward radix-2 FFT of N points (decimation in time), unscaled. `fft(im, re)` (the
 * parts swapped) is the unscaled inverse transform of `re + i·im`.
 */
function fft(re: Float64Array, im: Float64Array): void {
  permute(re, im);
  firstTwoStages(re, im);
  const h = stagePairs(re, im);
  lastStages(re, im, h);
}

function permute(re: Float64Array, im: Float64Array): void {
  for (let p = 0; p < bitReversalSwaps.length; p += 2) {
    const i = bitReversalSwaps[p]!;
    const j = bitReversalSwaps[p + 1]!;
    let t = re[i]!;
    re[i] = re[j]!;
    re[j] = t;
    t = im[i]!;
    im[i] = im[j]!;
    im[j] = t;
  }
}

/** The first two radix-2 stages together: their twiddles are 1 and -i. */
function firstTwoStages(re: Float64Array, im: Float64Array): void {
  for (let i = 0; i < N; i += 4) {
    const r0 = re[i]! + re[i + 1]!;
    const i0 = im[i]! + im[i + 1]!;
    const r1 = re[i]! - re[i + 1]!;
    const i1 = im[i]! - im[i + 1]!;
    const r2 = re[i + 2]! + re[i + 3]!;
    const i2 = im[i + 2]! + im[i + 3]!;
    const r3 = re[i + 2]! - re[i + 3]!;
    const i3 = im[i + 2]! - im[i + 3]!;
    re[i] = r0 + r2;
    im[i] = i0 + i2;
    re[i + 2] = r0 - r2;
    im[i + 2] = i0 - i2;
    re[i + 1] = r1 + i3;
    im[i + 1] = i1 - r3;
    re[i + 3] = r1 - i3;
    im[i + 3] = i1 + r3;
  }
}

/**
 * The next radix-2 stages two per pass (half-sizes h and 2h: the second stage's odd twiddle is the
 * even one times -i), while a pair fits; returns the half-size of the first stage left.
 */
function stagePairs(re: Float64Array, im: Float64Array): number {
  let h = 4;
  for (; 4 * h <= N; h <<= 2) {
    for (let k = 0; k < h; k++) {
      const c1 = twiddleCos[h + k]!;
      const s1 = twiddleSin[h + k]!;
      const c2 = twiddleCos[2 * h + k]!;
      const s2 = twiddleSin[2 * h + k]!;
      for (let a0 = k; a0 < N; a0 += 4 * h) {
        const a1 = a0 + h;
        const a2 = a1 + h;
        const a3 = a2 + h;
        let tr = re[a1]! * c1 - im[a1]! * s1;
        let ti = re[a1]! * s1 + im[a1]! * c1;
        const b0r = re[a0]! + tr;
        const b0i = im[a0]! + ti;
        const b1r = re[a0]! - tr;
        const b1i = im[a0]! - ti;
        tr = re[a3]! * c1 - im[a3]! * s1;
        ti = re[a3]! * s1 + im[a3]! * c1;
        const b2r = re[a2]! + tr;
        const b2i = im[a2]! + ti;
        const b3r = re[a2]! - tr;
        const b3i = im[a2]! - ti;
        const ur = b2r * c2 - b2i * s2;
        const ui = b2r * s2 + b2i * c2;
        const vr = b3r * c2 - b3i * s2;
        const vi = b3r * s2 + b3i * c2;
        re[a0] = b0r + ur;
        im[a0] = b0i + ui;
        re[a2] = b0r - ur;
        im[a2] = b0i - ui;
        re[a1] = b1r + vi;
        im[a1] = b1i - vr;
        re[a3] = b1r - vi;
        im[a3] = b1i + vr;
      }
    }
  }
  return h;
}

/** The radix-2 stages from half-size `first` on. */
function lastStages(re: Float64Array, im: Float64Array, first: number): void {
  for (let h = first; h < N; h <<= 1) {
    for (let k = 0; k < h; k++) {
      const c = twiddleCos[h + k]!;
      const s = twiddleSin[h + k]!;
      for (let a = k; a < N; a += 2 * h) {
        const b = a + h;
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

const toSample = (value: number): number => {
  const rounded = Math.round(value * 32_768);
  return rounded > 32_767 ? 32_767 : rounded < -32_768 ? -32_768 : rounded;
};

export class NoiseSuppressor {
  /** The previous frame's second hop, in [-1, 1): the first half of this frame's first window. */
  private readonly tail = new Float64Array(HOP);
  private readonly overlap = new Float64Array(HOP);
  private readonly smoothed = new Float64Array(BINS);
  private readonly minCurrent = new Float64Array(BINS).fill(Infinity);
  private readonly minPrevious = new Float64Array(BINS).fill(Infinity);
  private readonly previousGain = new Float64Array(BINS).fill(1);
  private readonly previousPower = new Float64Array(BINS);
  private readonly re = new Float64Array(N);
  private readonly im = new Float64Array(N);
  /** The spectra (bins 0..N/2) of the first and the second hop, filtered in place. */
  private readonly firstRe = new Float64Array(BINS);
  private readonly firstIm = new Float64Array(BINS);
  private readonly secondRe = new Float64Array(BINS);
  private readonly secondIm = new Float64Array(BINS);
  private hops = 0;

  /** Cleans one 20 ms frame (320 samples; missing samples count as silence); returns a new frame. */
  process(frame: Int16Array): Int16Array {
    this.analyse(frame);
    this.filter(this.firstRe, this.firstIm);
    this.filter(this.secondRe, this.secondIm);
    return this.synthesise(frame.length);
  }

  /** Windows both hops into one complex signal (first hop real, second imaginary), transforms it and separates the two spectra. */
  private analyse(frame: Int16Array): void {
    const { re, im, tail, firstRe, firstIm, secondRe, secondIm } = this;
    for (let i = 0; i < HOP; i++) {
      const early = (frame[i] ?? 0) / 32_768;
      const late = (frame[HOP + i] ?? 0) / 32_768;
      re[i] = tail[i]! * window[i]!;
      re[HOP + i] = early * window[HOP + i]!;
      im[i] = early * window[i]!;
      im[HOP + i] = late * window[HOP + i]!;
      tail[i] = late;
    }
    re.fill(0, WINDOW);
    im.fill(0, WINDOW);
    fft(re, im);
    // Z = X1 + i·X2 with X1, X2 Hermitian: X1[k] = (Z[k] + conj(Z[N-k])) / 2, X2[k] = (Z[k] - conj(Z[N-k])) / 2i.
    for (let k = 0; k < BINS; k++) {
      const m = (N - k) & (N - 1);
      firstRe[k] = 0.5 * (re[k]! + re[m]!);
      firstIm[k] = 0.5 * (im[k]! - im[m]!);
      secondRe[k] = 0.5 * (im[k]! + im[m]!);
      secondIm[k] = 0.5 * (re[m]! - re[k]!);
    }
  }

  /** One hop's Wiener gain applied to its spectrum, updating the noise tracker and the decision-directed state (hops in order). */
  private filter(specRe: Float64Array, specIm: Float64Array): void {
    const { smoothed, minCurrent, minPrevious, previousGain, previousPower } = this;
    this.hops++;
    if (this.hops % ROTATE_HOPS === 0) {
      minPrevious.set(minCurrent);
      minCurrent.fill(Infinity);
    }
    const first = this.hops === 1;
    for (let k = 0; k < BINS; k++) {
      const power = specRe[k]! * specRe[k]! + specIm[k]! * specIm[k]!;
      const level = first ? power : 0.5 * smoothed[k]! + 0.5 * power;
      smoothed[k] = level;
      if (level < minCurrent[k]!) minCurrent[k] = level;
      const noise = minCurrent[k]! < minPrevious[k]! ? minCurrent[k]! : minPrevious[k]!;
      const floor = NOISE_BIAS * noise + 1e-12;
      const posterior = power / floor;
      const prior = 0.98 * ((previousGain[k]! * previousGain[k]! * previousPower[k]!) / floor) + 0.02 * Math.max(0, posterior - 1);
      let gain = prior / (1 + prior);
      if (gain < GAIN_FLOOR) gain = GAIN_FLOOR;
      previousGain[k] = gain;
      previousPower[k] = power;
      specRe[k] = specRe[k]! * gain;
      specIm[k] = specIm[k]! * gain;
    }
  }

  /** Inverse-transforms Y1 + i·Y2 (the first hop comes out real, the second imaginary) and overlap-adds both hops. */
  private synthesise(length: number): Int16Array {
    const { re, im, overlap, firstRe, firstIm, secondRe, secondIm } = this;
    for (let k = 0; k < BINS; k++) {
      re[k] = firstRe[k]! - secondIm[k]!;
      im[k] = firstIm[k]! + secondRe[k]!;
    }
    for (let k = 1; k < N / 2; k++) {
      re[N - k] = firstRe[k]! + secondIm[k]!;
      im[N - k] = secondRe[k]! - firstIm[k]!;
    }
    fft(im, re);
    const out = allocSamples(length);
    for (let i = 0; i < HOP; i++) {
      out[i] = toSample(overlap[i]! + (re[i]! / N) * window[i]!);
      const middle = (re[HOP + i]! / N) * window[HOP + i]!;
      out[HOP + i] = toSample(middle + (im[i]! / N) * window[i]!);
      overlap[i] = (im[HOP + i]! / N) * window[HOP + i]!;
    }
    return out;
  }
}
