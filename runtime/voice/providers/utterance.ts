import { FRAME_MS } from '../audio.js';
import type { Transcript } from './types.js';

/**
 * What transcribers that hear an utterance at a time (not a continuous stream) share: the gate that
 * lets through the caller's audio from just before the VAD's speech onset to the end of the turn,
 * and the texts of an utterance's segments (transcribed apart, answered in any order) put back
 * together into interim transcripts and one final transcript per `finalize`.
 */

/** Audio kept from before the VAD's onset: it needs a few frames to be sure, and the first syllable starts before that. */
export const PRE_ROLL_MS = 300;

/** Lets through an utterance's frames: none before speech, the pre-roll with the first speech frame, then every frame until `close`. */
export class SpeechGate {
  private ring: Int16Array[] = [];
  private open = false;

  /**
   * The frames to pass on now (copies: callers may reuse theirs). While it waits for speech, the
   * oldest pre-roll frame's buffer is reused, so silence allocates nothing frame after frame.
   */
  pass(frame: Int16Array, speech: boolean): Int16Array[] {
    if (this.open) return [frame.slice()];
    const oldest = this.ring.length >= PRE_ROLL_MS / FRAME_MS ? this.ring.shift() : undefined;
    const copy = oldest?.length === frame.length ? oldest : new Int16Array(frame.length);
    copy.set(frame);
    this.ring.push(copy);
    if (!speech) return [];
    this.open = true;
    const frames = this.ring;
    this.ring = [];
    return frames;
  }

  /** The utterance ended: the next frames wait for speech again. */
  close(): void {
    this.open = false;
  }

  get passing(): boolean {
    return this.open;
  }
}

/** One piece of an utterance sent to the vendor: its text so far, and whether that is settled. */
export interface Segment {
  text: string;
  done: boolean;
  language?: string;
}

interface Utterance {
  readonly segments: Segment[];
  finalized: boolean;
  reported: string;
}

/**
 * Texts of utterances transcribed in segments. The utterance being reported is the oldest one not
 * yet final: its segments' texts so far are an interim transcript whenever they change; once it is
 * finalized and every segment of it settled, their text is its final transcript (exactly one per
 * `finalize`, empty when nothing was said), and the next utterance is reported.
 */
export class SegmentedTranscript {
  private readonly utterances: Utterance[] = [];

  constructor(private readonly report: (transcript: Transcript) => void) {}

  /** A new segment of the utterance in progress. */
  segment(): Segment {
    const segment: Segment = { text: '', done: false };
    this.current().segments.push(segment);
    return segment;
  }

  /** A segment's text changed (`done`: it is settled). */
  update(segment: Segment, text: string, done: boolean, language?: string): void {
    segment.text = text.trim();
    segment.done = segment.done || done;
    if (language) segment.language = language;
    this.flush();
  }

  /** The utterance in progress is over: its final transcript comes once all its segments are settled. */
  finalize(): void {
    this.current().finalized = true;
    this.flush();
  }

  private current(): Utterance {
    const last = this.utterances.at(-1);
    if (last && !last.finalized) return last;
    const utterance: Utterance = { segments: [], finalized: false, reported: '' };
    this.utterances.push(utterance);
    return utterance;
  }

  private flush(): void {
    for (let head = this.utterances[0]; head; head = this.utterances[0]) {
      const text = head.segments.map((s) => s.text).filter(Boolean).join(' ');
      if (head.finalized && head.segments.every((s) => s.done)) {
        this.utterances.shift();
        const language = head.segments.find((s) => s.language)?.language;
        this.report({ text, final: true, ...(language ? { language } : {}) });
        continue;
      }
      if (text !== head.reported) {
        head.reported = text;
        this.report({ text, final: false });
      }
      return;
    }
  }
}

/**
 * A vendor's detected language as the call's ISO 639-1 code: servers answer with the code ("de")
 * or, as OpenAI's `verbose_json` does, the English name ("german"). Undefined when it is none of
 * the call's languages.
 */
export function callLanguage(detected: unknown, languages: readonly string[]): string | undefined {
  if (typeof detected !== 'string' || detected === '') return undefined;
  const wanted = detected.toLowerCase();
  const names = new Intl.DisplayNames(['en'], { type: 'language' });
  return languages.find((code) => code.toLowerCase() === wanted || names.of(code)?.toLowerCase() === wanted);
}
