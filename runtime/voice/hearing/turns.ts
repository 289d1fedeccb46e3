/**
 * Voice activity and turn-taking policy.
 *
 * The VAD is an energy detector with an adaptive noise floor: a frame is speech when its level is
 * at least 12 dB above the floor and above -50 dBFS; speech starts after 3 speech frames in a row
 * (60 ms), so clicks and single bursts do not count, and it ends after 100 ms without speech (short
 * dips between words do not end it). The floor starts at the first frame's level
 * (at most -45 dBFS), follows quieter frames quickly and rises slowly, so steady background noise
 * is learned and ignored (the noise suppressor, on by default, removes most of it first).
 *
 * Assistant settings map to times as follows (both settings are seconds, as the spec's defaults
 * suggest):
 * - `endpoint_sensitivity` s: the caller's turn ends after max(200 ms, min(s, 5 s)) of silence
 *   counted from the caller's last loud frame, the VAD's hangover included (0.5 gives 500 ms). With `endpoint_type: ai` the wait doubles, by at least 700 ms and at most
 *   to 6 s, while the words so far look unfinished (a trailing conjunction or filler, a trailing
 *   comma, a number being read out, or no final punctuation from the transcriber).
 * - `interrupt_sensitivity` s: after max(60 ms, min(s, 5 s)) of the caller's speech over the agent,
 *   the agent pauses (its unheard speech kept). The interruption stands as soon as the caller's
 *   words take the turn (not all backchannel, at least `min_interrupt_words` of them when set), or
 *   after 1.5 s of speech with no words at all (a transcriber that gives none); otherwise, once the
 *   caller's utterance settles, the agent resumes from where it was last heard (a backchannel,
 *   a cough, too few words). A backchannel known before the pause does not pause it.
 */

export { EnergyVad, SPEECH_ONSET_FRAMES } from './vad/energy.js';

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

/**
 * How eager a vendor's semantic end-of-turn detection (OpenAI's `semantic_vad`) should be for the
 * silence `endpoint_sensitivity` asks of plain VAD: `high` answers within 2 s, `medium` 4 s, `low` 8 s.
 */
export function semanticEagerness(silenceMs: number): 'high' | 'medium' | 'low' {
  return silenceMs <= 300 ? 'high' : silenceMs <= 1_000 ? 'medium' : 'low';
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

/**
 * Whether a finished utterance is dropped as a backchannel: only when all of it is one ("yeah",
 * "mhm") and it came over the agent (`overAgent`) or was judged one while it began (`flagged`); a
 * caller who began with "yeah" and went on to say more has taken a turn.
 */
export function dropsAsBackchannel(text: string, flagged: boolean, overAgent: boolean): boolean {
  return text !== '' && isBackchannel(text) && (flagged || overAgent);
}

/**
 * Whether words said over the agent take the turn from it: some that are not all backchannel, and
 * at least `minWords` of them when that is set.
 */
export function takesTurn(words: string, minWords: number | null): boolean {
  return words !== '' && !isBackchannel(words) && wordCount(words) >= Math.max(1, minWords ?? 1);
}

export function wordCount(text: string): number {
  return text.split(/\s+/).filter((word) => /[\p{L}\p{N}]/u.test(word)).length;
}
