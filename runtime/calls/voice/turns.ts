import { levelDb } from './audio.js';

/**
 * Voice activity and turn-taking policy.
 *
 * The VAD is an energy detector with an adaptive noise floor: a frame is speech when its level is
 * at least 12 dB above the floor and above -50 dBFS; speech starts after 3 speech frames in a row
 * (60 ms), so clicks and single bursts do not count. The floor follows quiet frames quickly and
 * rises slowly, so steady background noise is learned and ignored.
 *
 * Assistant settings map to times as follows (both settings are seconds, as the spec's defaults
 * suggest):
 * - `endpoint_sensitivity` s: the caller's turn ends after max(200 ms, min(s, 5 s)) of silence
 *   (0.5 gives 500 ms). With `endpoint_type: ai` the wait doubles, by at least 700 ms and at most
 *   to 6 s, while the words so far look unfinished (a trailing conjunction or filler, a trailing
 *   comma, a number being read out, or no final punctuation from the transcriber).
 * - `interrupt_sensitivity` s: the caller barges in after max(60 ms, min(s, 5 s)) of speech over
 *   the agent, with at least `min_interrupt_words` transcribed words when that is set, and not
 *   when every word is a backchannel ("mm-hmm", "yes", "okay"...).
 */

export const SPEECH_ONSET_FRAMES = 3;
const MARGIN_DB = 12;
const ABSOLUTE_MIN_DB = -50;

export class EnergyVad {
  private floor = -70;
  private run = 0;
  /** True from the onset of speech until a non-speech frame. */
  speaking = false;

  /** Classifies one frame; returns whether it is (confirmed) speech. */
  process(frame: Int16Array): boolean {
    const level = levelDb(frame);
    const loud = level > ABSOLUTE_MIN_DB && level > this.floor + MARGIN_DB;
    if (loud) {
      this.run++;
    } else {
      this.run = 0;
      this.floor = level < this.floor ? this.floor + (level - this.floor) * 0.5 : this.floor + (level - this.floor) * 0.02;
    }
    this.speaking = this.run >= SPEECH_ONSET_FRAMES;
    return this.speaking;
  }
}

export const MIN_ENDPOINT_MS = 200;
export const MAX_ENDPOINT_MS = 5_000;
export const MAX_AI_ENDPOINT_MS = 6_000;
export const MIN_INTERRUPT_MS = 60;

const clamp = (value: number, min: number, max: number) => Math.min(max, Math.max(min, value));

/** Silence that ends the caller's turn. */
export function endpointDelayMs(sensitivity: number, type: 'vad' | 'ai', transcript: string): number {
  const base = clamp(Math.round(sensitivity * 1000), MIN_ENDPOINT_MS, MAX_ENDPOINT_MS);
  if (type !== 'ai' || !looksUnfinished(transcript)) return base;
  return Math.min(MAX_AI_ENDPOINT_MS, Math.max(base * 2, base + 700));
}

/** Caller speech over the agent needed to interrupt it. */
export function interruptDelayMs(sensitivity: number): number {
  return clamp(Math.round(sensitivity * 1000), MIN_INTERRUPT_MS, MAX_ENDPOINT_MS);
}

const TRAILING_WORDS = new Set([
  'and', 'or', 'but', 'because', 'so', 'then', 'if', 'with', 'to', 'the', 'a', 'an', 'of', 'for', 'my', 'your', 'is', 'at', 'in', 'on',
  'um', 'uh', 'er', 'erm', 'like', 'und', 'oder', 'aber', 'weil', 'et', 'ou', 'mais', 'y', 'o', 'pero',
]);

/** Whether the words so far read like a sentence still going on. */
export function looksUnfinished(transcript: string): boolean {
  const text = transcript.trim();
  if (text === '') return false;
  if (/[,;:\-–]$/.test(text)) return true;
  if (/\d$/.test(text)) return true;
  const last = text.toLowerCase().replace(/[^\p{L}\p{N}'\s-]/gu, '').split(/\s+/).pop() ?? '';
  if (TRAILING_WORDS.has(last)) return true;
  return !/[.!?…]$/.test(text);
}

const BACKCHANNELS = new Set([
  'mm', 'mmm', 'hm', 'hmm', 'mhm', 'mm-hmm', 'mmhmm', 'uh-huh', 'uhhuh', 'yes', 'yeah', 'yep', 'yup', 'ok', 'okay', 'right', 'sure',
  'alright', 'i', 'see', 'got', 'it', 'ah', 'oh', 'aha', 'ja', 'genau', 'oui', 'd\'accord', 'sí', 'si', 'vale', 'cool', 'great', 'uh', 'huh',
]);

/** Whether every word is a listener's acknowledgement rather than an attempt to take the turn. */
export function isBackchannel(text: string): boolean {
  const words = text.toLowerCase().replace(/[.,!?…]/g, ' ').split(/\s+/).filter(Boolean);
  return words.length > 0 && words.length <= 3 && words.every((word) => BACKCHANNELS.has(word));
}

export function wordCount(text: string): number {
  return text.split(/\s+/).filter((word) => /[\p{L}\p{N}]/u.test(word)).length;
}
