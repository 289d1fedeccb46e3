import type { Clock } from '../../clock.js';
import { FRAME_MS, FRAME_SAMPLES, allocSamples, copySamples, mixInto } from '../audio.js';

/**
 * The agent's outgoing audio for one call. Speech arrives as segments (one per sentence) in chunks
 * of any length; the playout cuts them into 20 ms frames and sends them in real time: the first
 * frame of an utterance at once, then each one when it falls due on its own 20 ms schedule (the
 * call ticker runs every 5 ms, so a frame leaves at most a few milliseconds late and never in a
 * burst; a schedule that fell behind by more than 100 ms restarts rather than catching up). After each segment a mark goes out; the transport echoes it when the caller has heard
 * that far (Twilio `mark`, the web call's `mark` frame), which is how the playout knows the agent
 * has finished speaking. `pause()` holds the speech while the caller may be interrupting and
 * `resume()` goes on from where the caller stopped hearing it; `clear()` drops everything unsent
 * (barge-in), and what the caller heard is reported per segment as the share of its frames that
 * went out.
 */

export interface PlayoutSink {
  audio(frame: Int16Array): void;
  mark(name: string): void;
  clear(): void;
}

export interface Segment {
  readonly id: number;
  /** What the segment says; a realtime model's transcript may arrive while it plays. */
  text: string;
  readonly frames: Int16Array[];
  sent: number;
  complete: boolean;
  acked: boolean;
  remainder: Int16Array | undefined;
}

/** A schedule this far behind restarts instead of sending a burst. */
const MAX_BEHIND_MS = 100;
/** A transport that never echoes marks is taken to have played a segment this long after its last frame. */
const MARK_TIMEOUT_MS = 1_000;
/**
 * Speech sent this recently when the playout pauses may not have reached the caller's ear yet
 * (the network, the carrier's jitter buffer): it is sent again when the playout resumes.
 */
export const PAUSE_REWIND_MS = 200;

export class Playout {
  private readonly segments: Segment[] = [];
  private readonly markSent = new Set<number>();
  /** When the next frame is due; undefined while nothing plays. */
  private nextDue: number | undefined;
  private nextId = 1;
  private ambientOffset = 0;
  private markTimer: unknown;
  /** Speech is held (the caller may be interrupting); ambient sound goes on. */
  private paused = false;
  /** When the last frame of speech went out. */
  private lastSpeechAt: number | undefined;
  /** Frames sent while the agent had something to say; the voice-to-voice probe reads the first. */
  onSpeechFrame: ((segment: Segment) => void) | undefined;
  /** Every sent frame (agent speech, ambient or both), for the recording. */
  onFrame: ((frame: Int16Array) => void) | undefined;
  /** How late (ms) each frame sent on the schedule left against its due time: the server's own jitter. */
  onLateness: ((ms: number) => void) | undefined;
  /** Everything queued has been heard. */
  onDrained: (() => void) | undefined;

  constructor(
    private readonly sink: PlayoutSink,
    private readonly clock: Clock,
    private readonly ambient?: { bed: Int16Array; gain: number },
  ) {}

  /** Starts a segment for `text`; audio follows with `push`, then `finish`. */
  begin(text: string): Segment {
    const segment: Segment = { id: this.nextId++, text, frames: [], sent: 0, complete: false, acked: false, remainder: undefined };
    this.segments.push(segment);
    return segment;
  }

  /** Queues speech; frames are views into `samples`, which the caller hands over and must not change. */
  push(segment: Segment, samples: Int16Array): void {
    let offset = 0;
    if (segment.remainder) {
      const need = FRAME_SAMPLES - segment.remainder.length;
      const joined = allocSamples(FRAME_SAMPLES);
      joined.set(segment.remainder);
      joined.set(samples.subarray(0, need), segment.remainder.length);
      if (samples.length >= need) {
        segment.frames.push(joined);
        segment.remainder = undefined;
        offset = need;
      } else {
        segment.remainder = joined.subarray(0, segment.remainder.length + samples.length);
        return;
      }
    }
    for (; offset + FRAME_SAMPLES <= samples.length; offset += FRAME_SAMPLES) segment.frames.push(samples.subarray(offset, offset + FRAME_SAMPLES));
    if (offset < samples.length) segment.remainder = samples.subarray(offset);
    this.pump();
  }

  finish(segment: Segment): void {
    if (segment.remainder) {
      const last = allocSamples(FRAME_SAMPLES);
      last.set(segment.remainder);
      segment.frames.push(last);
      segment.remainder = undefined;
    }
    segment.complete = true;
    this.pump();
  }

  /** Whether anything is queued, playing, or waiting for its mark. */
  get busy(): boolean {
    return this.segments.length > 0;
  }

  /** Called by the call ticker (every 5 ms): sends the frames that are due. */
  tick(now = this.clock.now()): void {
    if (this.nextDue === undefined) {
      if (!this.ambient) return;
      this.nextDue = now;
    }
    if (now - this.nextDue > MAX_BEHIND_MS) this.nextDue = now;
    while (this.nextDue !== undefined && now >= this.nextDue - 1) {
      const due = this.nextDue;
      if (this.sendNext()) {
        this.onLateness?.(Math.max(0, now - due));
        this.nextDue += FRAME_MS;
      } else if (this.ambient) {
        this.send(allocSamples(FRAME_SAMPLES), undefined);
        this.nextDue += FRAME_MS;
      } else this.nextDue = undefined;
    }
  }

  /**
   * Holds the speech: the transport drops what it buffered, and the speech of the last
   * `PAUSE_REWIND_MS` is sent again on `resume` (the rest goes on from where it stopped). Speech
   * pushed meanwhile queues. Ambient sound, when the assistant has it, goes on.
   */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    const now = this.clock.now();
    let rewind = this.lastSpeechAt === undefined ? 0 : Math.max(0, Math.ceil((PAUSE_REWIND_MS - (now - this.lastSpeechAt)) / FRAME_MS));
    for (let i = this.segments.length - 1; i >= 0 && rewind > 0; i--) {
      const segment = this.segments[i]!;
      if (segment.acked) break;
      const back = Math.min(rewind, segment.sent);
      if (back === 0) continue;
      segment.sent -= back;
      rewind -= back;
      // Its mark went out with audio the transport now drops: the echo of the clear is no proof it was heard.
      this.markSent.delete(segment.id);
    }
    if (!this.ambient) this.nextDue = undefined;
    this.sink.clear();
  }

  /** Speech goes on from where `pause` left it. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.pump();
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** Starts playing at once when the playout was idle. */
  private pump(): void {
    if (this.paused) return;
    if (this.nextDue !== undefined) {
      this.markFinished();
      return;
    }
    if (this.sendNext()) this.nextDue = this.clock.now() + FRAME_MS;
  }

  /** Sends the next frame of speech, if one is ready; marks segments whose last frame went out. */
  private sendNext(): boolean {
    if (this.paused) return false;
    for (const segment of this.segments) {
      if (segment.sent < segment.frames.length) {
        const frame = segment.frames[segment.sent++]!;
        this.send(frame, segment);
        this.markFinished();
        return true;
      }
      if (!segment.complete) return false;
    }
    this.markFinished();
    return false;
  }

  private markFinished(): void {
    for (const segment of this.segments) {
      if (!segment.complete || segment.sent < segment.frames.length) return;
      if (!segment.acked && !this.markSent.has(segment.id)) {
        this.markSent.add(segment.id);
        this.sink.mark(`seg-${segment.id}`);
        this.armMarkTimeout();
      }
    }
  }

  private send(frame: Int16Array, segment: Segment | undefined): void {
    let out = frame;
    if (this.ambient) {
      out = segment ? copySamples(frame) : frame;
      const bed = this.ambient.bed;
      if (this.ambientOffset + FRAME_SAMPLES > bed.length) this.ambientOffset = 0;
      mixInto(out, bed.subarray(this.ambientOffset, this.ambientOffset + FRAME_SAMPLES), this.ambient.gain);
      this.ambientOffset += FRAME_SAMPLES;
    }
    if (segment) {
      this.lastSpeechAt = this.clock.now();
      this.onSpeechFrame?.(segment);
    }
    this.onFrame?.(out);
    this.sink.audio(out);
  }

  private armMarkTimeout(): void {
    if (this.markTimer !== undefined) this.clock.clearTimeout(this.markTimer);
    this.markTimer = this.clock.setTimeout(() => {
      this.markTimer = undefined;
      for (const segment of this.segments) if (this.markSent.has(segment.id)) segment.acked = true;
      this.settle();
    }, MARK_TIMEOUT_MS);
  }

  /** The transport echoed a mark. */
  acknowledge(name: string): void {
    const id = Number(name.replace(/^seg-/, ''));
    const segment = this.segments.find((s) => s.id === id);
    if (!segment) return;
    for (const earlier of this.segments) {
      earlier.acked ||= earlier.id <= id && this.markSent.has(earlier.id);
    }
    this.settle();
  }

  private settle(): void {
    while (this.segments[0]?.acked) {
      this.markSent.delete(this.segments[0].id);
      this.segments.shift();
    }
    if (this.segments.length === 0) {
      if (this.markTimer !== undefined) this.clock.clearTimeout(this.markTimer);
      this.markTimer = undefined;
      this.onDrained?.();
    }
  }

  /**
   * Drops everything not yet sent and tells the transport to discard its buffer.
   * @returns the text of each segment cut to the share of its frames that went out.
   */
  clear(): { segment: Segment; heard: string; heardMs: number }[] {
    const result = this.segments.map((segment) => ({ segment, heard: heardText(segment), heardMs: segment.sent * FRAME_MS }));
    this.segments.length = 0;
    // A paused playout has had the transport's buffer dropped already, and sent no speech since.
    const alreadyCleared = this.paused;
    this.paused = false;
    this.markSent.clear();
    if (this.markTimer !== undefined) this.clock.clearTimeout(this.markTimer);
    this.markTimer = undefined;
    if (!this.ambient) this.nextDue = undefined;
    if (!alreadyCleared) this.sink.clear();
    return result;
  }

  close(): void {
    this.segments.length = 0;
    if (this.markTimer !== undefined) this.clock.clearTimeout(this.markTimer);
    this.markTimer = undefined;
    this.onDrained = undefined;
  }
}

/** The words of a segment the caller heard, in proportion to the frames sent. */
export function heardText(segment: Segment): string {
  if (segment.acked || (segment.complete && segment.sent >= segment.frames.length)) return segment.text;
  const total = segment.complete ? segment.frames.length : Math.max(segment.frames.length, 1);
  if (segment.sent === 0) return '';
  const words = segment.text.split(/\s+/).filter(Boolean);
  const share = Math.min(1, segment.sent / total);
  return words.slice(0, Math.floor(words.length * share)).join(' ');
}
