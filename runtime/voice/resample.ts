/**
 * Band-limited resampling between two rates in a rational ratio (22 050 Hz to 16 kHz is 320/441):
 * a polyphase windowed-sinc filter whose cutoff sits a little below the lower Nyquist frequency,
 * so a downsampled voice does not alias. One table of `L` phases is computed per rate pair; each
 * output sample costs `2 × HALF_TAPS` multiply-adds. Streaming: chunks of any length go in, the
 * phase and the filter's history carry over, `flush` returns the tail.
 */

const HALF_TAPS = 16;
/** Cutoff as a share of the lower rate's Nyquist frequency. */
const CUTOFF = 0.92;

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

const tables = new Map<string, Float32Array>();

/** Taps of every phase, `2 × HALF_TAPS` each, for output step `down/up` input samples; each phase sums to 1. */
function phaseTable(up: number, down: number): Float32Array {
  const key = `${up}/${down}`;
  const cached = tables.get(key);
  if (cached) return cached;
  const width = 2 * HALF_TAPS;
  // In cycles per input sample.
  const cutoff = (0.5 * CUTOFF * Math.min(up, down)) / down;
  const table = new Float32Array(up * width);
  for (let phase = 0; phase < up; phase++) {
    const fraction = phase / up;
    let sum = 0;
    for (let j = 0; j < width; j++) {
      // Distance from the output instant to input sample `base - HALF_TAPS + 1 + j`.
      const x = fraction + HALF_TAPS - 1 - j;
      const sinc = x === 0 ? 1 : Math.sin(2 * Math.PI * cutoff * x) / (2 * Math.PI * cutoff * x);
      const window = 0.42 + 0.5 * Math.cos((Math.PI * x) / HALF_TAPS) + 0.08 * Math.cos((2 * Math.PI * x) / HALF_TAPS);
      const tap = Math.abs(x) >= HALF_TAPS ? 0 : sinc * window;
      table[phase * width + j] = tap;
      sum += tap;
    }
    for (let j = 0; j < width; j++) table[phase * width + j]! /= sum;
  }
  tables.set(key, table);
  return table;
}

export class BandLimitedResampler {
  private readonly up: number;
  private readonly down: number;
  private readonly table: Float32Array;
  /** Input not yet behind the filter, starting at absolute input index `start`. */
  private history = new Int16Array(0);
  private start = 0;
  /** Absolute index of the next output sample. */
  private produced = 0;

  constructor(readonly fromRate: number, readonly toRate: number) {
    const divisor = gcd(fromRate, toRate);
    this.up = toRate / divisor;
    this.down = fromRate / divisor;
    this.table = phaseTable(this.up, this.down);
  }

  process(input: Int16Array): Int16Array {
    if (this.fromRate === this.toRate) return input;
    const joined = new Int16Array(this.history.length + input.length);
    joined.set(this.history);
    joined.set(input, this.history.length);
    this.history = joined;
    return this.drain(this.start + joined.length - HALF_TAPS);
  }

  /** The output still owed for the input so far (its end padded with silence). */
  flush(): Int16Array {
    if (this.fromRate === this.toRate) return new Int16Array(0);
    const end = this.start + this.history.length;
    const padded = new Int16Array(this.history.length + HALF_TAPS);
    padded.set(this.history);
    this.history = padded;
    return this.drain(end - 1);
  }

  /** Output samples whose base input index is at most `lastBase`. */
  private drain(lastBase: number): Int16Array {
    const width = 2 * HALF_TAPS;
    const out: number[] = [];
    const { up, down, table, history, start } = this;
    for (;;) {
      const position = this.produced * down;
      const base = Math.floor(position / up);
      if (base > lastBase) break;
      const phase = position - base * up;
      const first = base - HALF_TAPS + 1 - start;
      let sum = 0;
      for (let j = 0; j < width; j++) {
        const index = first + j;
        if (index >= 0 && index < history.length) sum += history[index]! * table[phase * width + j]!;
      }
      out.push(sum > 32_767 ? 32_767 : sum < -32_768 ? -32_768 : Math.round(sum));
      this.produced++;
    }
    // Keep what the next output's filter reaches back to.
    const keepFrom = Math.floor((this.produced * down) / up) - HALF_TAPS + 1 - start;
    if (keepFrom > 0) {
      this.history = history.slice(Math.min(keepFrom, history.length));
      this.start += Math.min(keepFrom, history.length);
    }
    return Int16Array.from(out);
  }
}
