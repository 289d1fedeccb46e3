import type { Clock } from '../../clock.js';
import { FRAME_MS, ambientBed, dtmfTone } from '../audio.js';
import type { CallSpec, CallTransport, Language, SessionHooks } from '../spec.js';
import { Playout, heardText, type Segment } from './playout.js';

/** What the caller heard of a response that ended; `realtime` when a realtime model's item was cut. */
export interface Heard {
  readonly text: string;
  /** The response was cut while its audio played: the realtime model must be told how much went out. */
  readonly cut: { readonly itemId: string | undefined; readonly ms: number } | undefined;
}

/**
 * The agent's voice in one call: the playout of the transport it was attached to, and the response
 * being spoken (its segments, so that a cut one can be reported as heard). Responders speak through
 * it (TTS sentences, a realtime model's audio, keypad tones) and never touch the transport.
 */
export class Speaker {
  private playout: Playout | undefined;
  private drainWaiter: (() => void) | undefined;
  private current: { segments: Segment[]; realtimeItem: string | undefined } | undefined;

  constructor(
    private readonly spec: CallSpec,
    private readonly clock: Clock,
  ) {}

  /** The media connection is up: audio goes out on it from now on. `onSpeech` marks the first frame of each utterance. */
  attach(transport: CallTransport, hooks: SessionHooks, onSpeech: () => void): void {
    const ambient = this.spec.ambient ? { bed: ambientBed(this.spec.ambient.sound), gain: this.spec.ambient.volume } : undefined;
    const playout = new Playout({ audio: (frame) => transport.sendAudio(frame), mark: (name) => transport.sendMark(name), clear: () => transport.clear() }, this.clock, ambient);
    playout.onFrame = hooks.agentFrame;
    playout.onLateness = hooks.frameLateness;
    playout.onSpeechFrame = onSpeech;
    playout.onDrained = () => {
      const waiter = this.drainWaiter;
      this.drainWaiter = undefined;
      waiter?.();
    };
    this.playout = playout;
  }

  /** Audio is still going out or not yet heard. */
  get busy(): boolean {
    return this.playout !== undefined && this.playout.busy;
  }

  /**
   * The caller may be interrupting: the agent's speech is held (what the carrier buffered is
   * dropped) until `resume`, or until the response ends cut (`endResponse(true)`).
   */
  pause(): void {
    this.playout?.pause();
  }

  /** Not an interruption after all: the speech goes on from where the caller stopped hearing it. */
  resume(): void {
    this.playout?.resume();
  }

  get paused(): boolean {
    return this.playout?.isPaused ?? false;
  }

  /** The call ticker: sends the frames that fell due. */
  tick(now: number): void {
    this.playout?.tick(now);
  }

  /** The far end played everything up to mark `name`. */
  acknowledge(name: string): void {
    this.playout?.acknowledge(name);
  }

  /** A response begins: what is spoken from now on is its own. */
  beginResponse(): void {
    this.current = { segments: [], realtimeItem: undefined };
  }

  get responding(): boolean {
    return this.current !== undefined;
  }

  /** Speaks `text` in `language` with the assistant's TTS voice; `started` on its first audio. */
  async say(text: string, language: Language, signal: AbortSignal, started: () => void): Promise<void> {
    const tts = this.spec.tts;
    if (!this.playout || !tts || signal.aborted) return;
    const playout = this.playout;
    const segment = this.segment(text);
    const settings = this.spec.voiceSettings;
    for await (const chunk of tts.synthesize({ text, voice: language.voice, language: language.code, speed: settings.speed, stability: settings.stability, similarity: settings.similarity, emotion: settings.emotion, signal })) {
      if (signal.aborted) return;
      if (chunk.length > 0) {
        started();
        playout.push(segment, chunk);
      }
    }
    playout.finish(segment);
  }

  /** Plays keypad tones into the call (IVR navigation); not part of the transcript. */
  tones(digits: string, started: () => void): void {
    const playout = this.playout;
    if (!playout) return;
    const segment = playout.begin('');
    for (const key of digits) playout.push(segment, dtmfTone(key));
    started();
    playout.finish(segment);
  }

  /** A segment for a realtime model's audio of item `itemId`; undefined when nothing can play. */
  realtimeSegment(text: string, itemId: string): Segment | undefined {
    if (!this.playout || !this.current) return undefined;
    this.current.realtimeItem = itemId;
    return this.segment(text);
  }

  push(segment: Segment, samples: Int16Array): void {
    this.playout?.push(segment, samples);
  }

  finish(segment: Segment): void {
    this.playout?.finish(segment);
  }

  /** Resolves once everything sent was heard, or at `signal`. */
  drained(signal: AbortSignal): Promise<void> {
    if (!this.busy) return Promise.resolve();
    return new Promise((resolve) => {
      this.drainWaiter = resolve;
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  /**
   * Ends the response: what the caller heard of it. `cut` (a barge-in, a hang-up) also clears the
   * audio not yet played, and counts only what went out; undefined when no response was speaking.
   */
  endResponse(cut: boolean): Heard | undefined {
    const current = this.current;
    if (!current) return undefined;
    this.current = undefined;
    if (cut && this.playout) {
      const cleared = new Map(this.playout.clear().map((c) => [c.segment.id, c]));
      const text = current.segments.map((s) => cleared.get(s.id)?.heard ?? heardText(s)).filter(Boolean).join(' ');
      const ms = current.segments.reduce((sum, s) => sum + (cleared.get(s.id)?.heardMs ?? s.sent * FRAME_MS), 0);
      return { text, cut: { itemId: current.realtimeItem, ms } };
    }
    return { text: current.segments.map((s) => (cut ? heardText(s) : s.text)).filter(Boolean).join(' '), cut: undefined };
  }

  close(): void {
    this.playout?.close();
  }

  private segment(text: string): Segment {
    const segment = this.playout!.begin(text);
    this.current?.segments.push(segment);
    return segment;
  }
}
