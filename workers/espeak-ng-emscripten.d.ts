/** The part of `@echogarden/espeak-ng-emscripten` (which ships no types) the speech worker uses. */
declare module '@echogarden/espeak-ng-emscripten' {
  export interface EspeakNgWorker {
    /** 0 when the voice (`en-us`, `de+f3`) exists. */
    set_voice(name: string): number;
    set_rate(wordsPerMinute: number): number;
    set_pitch(pitch: number): number;
    /** Synchronous: the callback gets PCM16 mono 22 050 Hz chunks as espeak-ng produces them. */
    synthesize(text: string, callback: (samples: Int16Array | undefined, events: unknown[]) => void): void;
  }
  const initialize: () => Promise<{ eSpeakNGWorker: new () => EspeakNgWorker }>;
  export default initialize;
}
