import type { Logger } from '../../../logger.js';
import { CONTEXT_SAMPLES, INPUT_SAMPLES, WINDOW_SAMPLES } from '../../../../workers/vadProtocol.js';
import { levelDb } from '../../audio.js';
import { EnergyVad, HANGOVER_FRAMES } from './energy.js';
import { SileroEngine, type SileroEngineOptions, type VadStream } from './engine.js';
import type { Vad, VadSource } from './vad.js';

/**
 * Silero VAD for one call. Frames are cut into 32 ms windows (512 samples); each window goes to
 * the engine's worker, unless the energy gate already knows it is silence, and its speech
 * probability comes back a window or two later. Every frame is answered at once from the latest
 * probability known:
 * - speech starts once 60 ms of windows in a row (two) reach 0.5, Silero's usual onset;
 * - it goes on while the latest probability is at least 0.35 and ends after 100 ms below that
 *   (the energy VAD's hangover), so dips between words do not end it;
 * - a frame is loud while speech goes on and the latest probability is at least 0.35: the last
 *   loud frame, from which the end of turn is timed, comes about one window late (20-40 ms).
 * The gate: a window below -55 dBFS, or within 3 dB of the quietest window of the last two
 * seconds (a steady noise already learned), is not sent and counts as probability 0.
 *
 * Fallback: while no probability newer than 200 ms is known (the model still loading, the worker
 * failed or late), the frame gets the energy VAD's answer, run alongside all the time; the call
 * logs this once. The energy VAD says "speech" for any loud sound (a cough, a door, noise);
 * Silero does not.
 */

export const POSITIVE_THRESHOLD = 0.5;
export const NEGATIVE_THRESHOLD = 0.35;
export const MIN_SPEECH_MS = 60;
const WINDOW_MS = (WINDOW_SAMPLES / 16_000) * 1000;
const ONSET_WINDOWS = Math.ceil(MIN_SPEECH_MS / WINDOW_MS);
/** Frames (20 ms) without a newer probability after which the energy VAD answers. */
const STALE_FRAMES = 10;
const GATE_ABSOLUTE_DB = -55;
const GATE_MARGIN_DB = 3;
/** Windows of level history for the gate's floor: about two seconds. */
const GATE_HISTORY = 62;

export class SileroVad implements Vad {
  speaking = false;
  loud = false;
  private readonly energy = new EnergyVad();
  private readonly stream: VadStream;
  /** The window being filled, after the 64 samples before it (Silero's context). */
  private readonly input = new Int16Array(INPUT_SAMPLES);
  private filled = 0;
  private seq = 0;
  /** Probabilities the engine returned since the last frame, as [seq, probability]. */
  private readonly arrived: number[] = [];
  private appliedSeq = -1;
  private probability = 0;
  /** Windows in a row at or above the positive threshold. */
  private run = 0;
  private quiet = 0;
  private frames = 0;
  private appliedAtFrame = 0;
  private readonly levels = new Float32Array(GATE_HISTORY);
  private levelCount = 0;
  /** The call's first fallback was logged (the only one logged). */
  private loggedFallback = false;
  private closed = false;

  constructor(engine: SileroEngine, private readonly logger: Logger) {
    this.stream = engine.stream((seq, probability) => this.arrived.push(seq, probability));
  }

  process(frame: Int16Array): boolean {
    this.frames++;
    this.energy.process(frame);
    this.take(frame);
    for (let i = 0; i < this.arrived.length; i += 2) this.apply(this.arrived[i]!, this.arrived[i + 1]!);
    this.arrived.length = 0;
    if (this.frames - this.appliedAtFrame > STALE_FRAMES) {
      if (!this.loggedFallback) this.logger.warn('the Silero VAD has no recent answer; the energy VAD answers for this call meanwhile');
      this.loggedFallback = true;
      this.speaking = this.energy.speaking;
      this.loud = this.energy.loud;
      this.run = 0;
      this.quiet = 0;
      return this.speaking;
    }
    if (this.run >= ONSET_WINDOWS) this.speaking = true;
    const voiced = this.probability >= NEGATIVE_THRESHOLD;
    if (voiced) this.quiet = 0;
    else if (this.speaking && ++this.quiet > HANGOVER_FRAMES) this.speaking = false;
    this.loud = this.speaking && voiced;
    return this.speaking;
  }

  /** The latest speech probability known (tests and benchmarks read it). */
  get latestProbability(): number {
    return this.probability;
  }

  /** Whether the last frame was answered by the energy VAD. */
  get fallingBack(): boolean {
    return this.frames - this.appliedAtFrame > STALE_FRAMES;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stream.close();
  }

  /** Adds the frame's samples to the window being filled, cutting each full one. */
  private take(frame: Int16Array): void {
    let offset = 0;
    while (offset < frame.length) {
      const n = Math.min(frame.length - offset, WINDOW_SAMPLES - this.filled);
      this.input.set(frame.subarray(offset, offset + n), CONTEXT_SAMPLES + this.filled);
      this.filled += n;
      offset += n;
      if (this.filled < WINDOW_SAMPLES) continue;
      this.cut();
      this.filled = 0;
    }
  }

  private cut(): void {
    const seq = this.seq++;
    const level = levelDb(this.input.subarray(CONTEXT_SAMPLES));
    let floor = Infinity;
    for (let i = 0; i < Math.min(this.levelCount, GATE_HISTORY); i++) floor = Math.min(floor, this.levels[i]!);
    this.levels[this.levelCount++ % GATE_HISTORY] = level;
    if (level < GATE_ABSOLUTE_DB || level < floor + GATE_MARGIN_DB) this.apply(seq, 0);
    // A window the engine cannot take now gets no probability: the call falls back if that lasts.
    else if (!this.closed) this.stream.submit(seq, this.input);
    this.input.copyWithin(0, WINDOW_SAMPLES, INPUT_SAMPLES);
  }

  private apply(seq: number, probability: number): void {
    if (seq <= this.appliedSeq) return;
    this.appliedSeq = seq;
    this.appliedAtFrame = this.frames;
    this.probability = probability;
    this.run = probability >= POSITIVE_THRESHOLD ? this.run + 1 : 0;
  }
}

/** `VOICE_VAD=silero`: one engine (one worker thread) for the process, a `SileroVad` per call. */
export function sileroVads(options: SileroEngineOptions): VadSource & { readonly engine: SileroEngine } {
  const engine = new SileroEngine(options);
  return {
    name: 'silero',
    engine,
    open: (callId) => new SileroVad(engine, options.logger.child({ callId })),
    settled: () => engine.idle(),
    close: () => engine.close(),
  };
}
