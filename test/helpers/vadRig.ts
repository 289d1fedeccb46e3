import pino from 'pino';
import { Writable } from 'node:stream';
import { EnergyVad } from '../../runtime/voice/hearing/vad/energy.js';
import { sileroVads, type SileroVad } from '../../runtime/voice/hearing/vad/silero.js';
import type { SileroEngineOptions } from '../../runtime/voice/hearing/vad/engine.js';
import type { Vad } from '../../runtime/voice/hearing/vad/vad.js';
import { frames } from './vadAudio.js';

/** A logger whose lines (parsed) the test reads. */
export function loggedLines() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: pino({ level: 'info' }, sink) };
}

/** A Silero engine whose log lines the test reads; closed at the test's end. */
export function sileroRig(t: { teardown(fn: () => unknown): void }, options: Partial<SileroEngineOptions> = {}) {
  const { lines, logger } = loggedLines();
  const vads = sileroVads({ ...options, logger });
  t.teardown(() => vads.close());
  return { vads, engine: vads.engine, lines, open: (callId = 1) => vads.open(callId) as SileroVad };
}

/** Per frame of one VAD: `S` speaking and loud, `s` speaking, `.` not. */
export interface Trace {
  readonly marks: string;
  /** Index of the first speaking frame, or -1. */
  readonly onset: number;
  /** Index of the last speaking frame, or -1. */
  readonly last: number;
  /** Index of the last loud frame, or -1. */
  readonly lastLoud: number;
  readonly probabilities: number[];
}

function mark(vad: Vad, speaking: boolean): string {
  return speaking ? (vad.loud ? 'S' : 's') : '.';
}

function trace(marks: string, probabilities: number[]): Trace {
  return { marks, onset: marks.search(/[Ss]/), last: Math.max(marks.lastIndexOf('S'), marks.lastIndexOf('s')), lastLoud: marks.lastIndexOf('S'), probabilities };
}

/**
 * Runs `audio` frame by frame through the energy VAD and each Silero VAD given (one audio each,
 * all in step); after every frame the engine is waited for, so answers arrive at the same frame
 * on every run (the engine's real lag, a window or two, without the machine's load in it).
 */
export async function runInStep(engine: { idle(): Promise<void> }, pairs: Array<{ vad: SileroVad; audio: Int16Array }>): Promise<Trace[]> {
  const framed = pairs.map((p) => frames(p.audio));
  const marks = pairs.map(() => '');
  const probabilities: number[][] = pairs.map(() => []);
  const length = Math.max(...framed.map((f) => f.length));
  for (let i = 0; i < length; i++) {
    pairs.forEach(({ vad }, k) => {
      const frame = framed[k]![i];
      if (!frame) return;
      marks[k] += mark(vad, vad.process(frame));
      probabilities[k]!.push(vad.latestProbability);
    });
    await engine.idle();
  }
  return marks.map((m, k) => trace(m, probabilities[k]!));
}

export function energyTrace(audio: Int16Array): Trace {
  const vad = new EnergyVad();
  let marks = '';
  for (const frame of frames(audio)) marks += mark(vad, vad.process(frame));
  return trace(marks, []);
}
