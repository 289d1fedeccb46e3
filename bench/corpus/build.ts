import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ClipKind, ClipSpec, SoundName } from './plan.js';
import { CORPUS_RATE, phoneBand, speak, synthesize, toolVersions } from './tools.js';

/**
 * Builds the turn-taking corpus (plan.ts) with espeak-ng and sox, or reads the clips already built.
 * Each clip is raw 8 kHz G.711 mu-law (`<id>.ulaw`, whole 20 ms frames) with a label
 * (`<id>.json`, `ClipLabel`) giving the ground truth on the clip's own timeline. Speech is levelled
 * to -20 dBFS active level, as a phone line carries it; pauses are digital silence before the phone
 * band's filter; a background is mixed at its SNR against the caller's active speech level, from
 * 1.5 s before the caller speaks to 2.5 s after. Clips
 * live under `<dir>/<tools' version hash>/` and are rebuilt only when their spec changes; nothing
 * of it is committed.
 */

/** Bumped when the builder's output changes for the same spec. */
const BUILDER_VERSION = 2;
const LEAD_MS = 300;
const TAIL_MS = 400;
/** A background is on before the caller speaks and after: a television does not start with the caller. */
const BACKGROUND_LEAD_MS = 1_500;
const BACKGROUND_TAIL_MS = 2_500;
const SPEECH_LEVEL_DB = -20;
const FRAME_BYTES = (CORPUS_RATE * 20) / 1000;

export interface Segment {
  readonly startMs: number;
  readonly endMs: number;
}

export interface ClipLabel {
  readonly id: string;
  readonly kind: ClipKind;
  readonly language: string;
  readonly voice: string;
  /** Words per minute. */
  readonly rate: number;
  /** What the caller says; ` … ` marks a pause. Empty for noise. */
  readonly text: string;
  readonly durationMs: number;
  /** Where the caller's voice is (each spoken part, from its first to its last audible 10 ms). */
  readonly speech: readonly Segment[];
  /** Pauses inside the caller's turn: from the end of one spoken part to the start of the next. */
  readonly pauses: ReadonlyArray<Segment & { readonly nominalMs: number }>;
  /** Non-speech sounds (coughs, doors, music, a television), with their level. */
  readonly sounds: ReadonlyArray<Segment & { readonly sound: SoundName; readonly levelDb: number }>;
  readonly background: { readonly sound: 'tv' | 'music'; readonly snrDb: number } | null;
  /** Hash of the spec and builder it was made from; a different one means rebuild. */
  readonly build: string;
}

export interface Clip {
  readonly label: ClipLabel;
  /** 8 kHz mu-law, a multiple of 160 bytes (20 ms frames). */
  readonly audio: Uint8Array;
}

const msToSamples = (ms: number) => Math.round((ms * CORPUS_RATE) / 1000);
const samplesToMs = (samples: number) => Math.round((samples * 1000) / CORPUS_RATE);
const WINDOW = msToSamples(10);

function windowPowers(audio: Int16Array): Float64Array {
  const powers = new Float64Array(Math.ceil(audio.length / WINDOW));
  for (let w = 0; w < powers.length; w++) {
    let sum = 0;
    const end = Math.min(audio.length, (w + 1) * WINDOW);
    for (let i = w * WINDOW; i < end; i++) sum += audio[i]! * audio[i]!;
    powers[w] = sum / Math.max(1, end - w * WINDOW);
  }
  return powers;
}

const dbOf = (power: number) => (power <= 0 ? -120 : 10 * Math.log10(power / (32_768 * 32_768)));

/** Mean power of the windows within 30 dB of the loudest: the level while something sounds. */
function activePower(audio: Int16Array): number {
  const powers = windowPowers(audio);
  const top = Math.max(...powers);
  const active = powers.filter((p) => p > 0 && dbOf(p) > dbOf(top) - 30);
  return active.reduce((a, b) => a + b, 0) / Math.max(1, active.length);
}

function scaled(audio: Int16Array, gain: number): Int16Array {
  return Int16Array.from(audio, (v) => Math.max(-32_768, Math.min(32_767, Math.round(v * gain))));
}

/** `audio` at `levelDb` dBFS active level. */
function leveled(audio: Int16Array, levelDb: number): Int16Array {
  return scaled(audio, Math.sqrt(10 ** (levelDb / 10) * 32_768 * 32_768 / Math.max(1, activePower(audio))));
}

/** Without the silence espeak-ng puts before and after (windows 35 dB below the loudest or under -55 dBFS). */
function trimmed(audio: Int16Array): Int16Array {
  const powers = windowPowers(audio);
  const top = dbOf(Math.max(...powers));
  const audible = (p: number) => dbOf(p) > Math.max(-55, top - 35);
  const first = powers.findIndex(audible);
  const last = powers.findLastIndex(audible);
  return first < 0 ? audio : audio.slice(first * WINDOW, Math.min(audio.length, (last + 1) * WINDOW));
}

/** Pieces of audio one after another. */
export function concat(parts: readonly Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

function mix(target: Int16Array, source: Int16Array, at = 0, loop = false): void {
  for (let i = at; i < target.length; i++) {
    const j = i - at;
    if (!loop && j >= source.length) break;
    target[i] = Math.max(-32_768, Math.min(32_767, target[i]! + source[j % source.length]!));
  }
}

const silence = (ms: number) => new Int16Array(msToSamples(ms));

function noiseBurst(seconds: number): Int16Array {
  const s = seconds.toFixed(3);
  return synthesize(['synth', s, 'pinknoise', 'highpass', '250', 'lowpass', '2500', 'fade', 'q', '0.008', s, (seconds * 0.7).toFixed(3)]);
}

function door(far: boolean): Int16Array {
  const thump = synthesize(['synth', '0.7', 'brownnoise', 'lowpass', '300', 'fade', 'q', '0.002', '0.7', '0.65', ...(far ? ['reverb', '80'] : [])]);
  const click = synthesize(['synth', '0.03', 'whitenoise', 'fade', 'q', '0.001', '0.03', '0.029']);
  const out = leveled(thump, -12);
  mix(out, leveled(click, far ? -24 : -10));
  return out;
}

function music(): Int16Array {
  const notes = [220, 247, 262, 294, 330, 294, 262, 247];
  return concat(notes.map((f) => {
    const note = synthesize(['synth', '0.35', 'pluck', String(f)]);
    mix(note, scaled(synthesize(['synth', '0.35', 'pluck', String(f * 1.5)]), 0.6));
    return note;
  }));
}

/** Two announcers talking at once, as a television across the room sounds. */
function television(): Int16Array {
  const a = speak('The weather tomorrow will be cloudy with some rain in the north, and sunshine later in the afternoon.', 'en-us+m1', 165);
  const b = speak('Markets closed higher today after a quiet session, led by shares in energy and technology.', 'en-gb+f2', 175);
  const out = new Int16Array(Math.max(a.length, b.length + msToSamples(700)));
  mix(out, a);
  mix(out, scaled(b, 0.8), msToSamples(700));
  return out;
}

const SOUNDS: Record<SoundName, () => Int16Array> = {
  cough: () => concat([noiseBurst(0.18), silence(80), noiseBurst(0.12)]),
  'cough-long': () => concat([noiseBurst(0.25), silence(100), noiseBurst(0.2), silence(100), noiseBurst(0.15)]),
  door: () => door(false),
  'door-far': () => door(true),
  music,
  tv: television,
};

/** The clip's audio (8 kHz PCM16 before the phone band) and its label. */
function render(spec: ClipSpec, build: string): { audio: Int16Array; label: ClipLabel } {
  const lead = spec.background ? BACKGROUND_LEAD_MS : LEAD_MS;
  const pieces: Int16Array[] = [silence(lead)];
  const speech: Segment[] = [];
  const pauses: Array<Segment & { nominalMs: number }> = [];
  const sounds: Array<Segment & { sound: SoundName; levelDb: number }> = [];
  let at = msToSamples(lead);
  let pendingPause: number | undefined;
  for (const part of spec.parts) {
    let piece: Int16Array;
    if ('pause' in part) {
      piece = silence(part.pause);
      pendingPause = part.pause;
    } else if ('say' in part) {
      piece = leveled(trimmed(speak(part.say, spec.voice, spec.rate)), SPEECH_LEVEL_DB);
      const segment = { startMs: samplesToMs(at), endMs: samplesToMs(at + piece.length) };
      if (pendingPause !== undefined && speech.length > 0) pauses.push({ startMs: speech.at(-1)!.endMs, endMs: segment.startMs, nominalMs: pendingPause });
      pendingPause = undefined;
      speech.push(segment);
    } else {
      piece = leveled(trimmed(SOUNDS[part.sound]()), part.levelDb);
      sounds.push({ startMs: samplesToMs(at), endMs: samplesToMs(at + piece.length), sound: part.sound, levelDb: part.levelDb });
    }
    pieces.push(piece);
    at += piece.length;
  }
  pieces.push(silence(spec.background ? BACKGROUND_TAIL_MS : TAIL_MS));
  const voice = concat(pieces);
  // Whole 20 ms frames.
  const audio = new Int16Array(Math.ceil(voice.length / FRAME_BYTES) * FRAME_BYTES);
  audio.set(voice);
  if (spec.background) {
    const bed = SOUNDS[spec.background.sound]();
    const speechPower = activePower(voice.subarray(msToSamples(lead), at));
    const bedPower = windowPowers(bed).reduce((a, b) => a + b, 0) / Math.ceil(bed.length / WINDOW);
    mix(audio, scaled(bed, Math.sqrt(speechPower / 10 ** (spec.background.snrDb / 10) / bedPower)), 0, true);
  }
  const text = spec.parts.map((p) => ('say' in p ? p.say : 'pause' in p ? '…' : '')).filter(Boolean).join(' ');
  return {
    audio,
    label: { id: spec.id, kind: spec.kind, language: spec.language, voice: spec.voice, rate: spec.rate, text, durationMs: samplesToMs(audio.length), speech, pauses, sounds, background: spec.background ?? null, build },
  };
}

export interface CorpusOptions {
  /** Where clips are kept between runs (e.g. under DATA_DIR or the system's temporary directory). */
  readonly dir: string;
  readonly clips: readonly ClipSpec[];
}

export interface Corpus {
  readonly dir: string;
  readonly clips: readonly Clip[];
  /** How many clips were built now (the others were read). */
  readonly built: number;
}

/** The clips of `options.clips`, read from `options.dir` when built before, built (and kept) otherwise. */
export async function loadCorpus(options: CorpusOptions): Promise<Corpus> {
  const tools = toolVersions();
  const dir = join(options.dir, createHash('sha256').update(`${BUILDER_VERSION} ${tools}`).digest('hex').slice(0, 12));
  await mkdir(dir, { recursive: true });
  const clips: Clip[] = [];
  let built = 0;
  for (const spec of options.clips) {
    const build = createHash('sha256').update(JSON.stringify(spec)).digest('hex').slice(0, 16);
    const base = join(dir, spec.id);
    const kept = await readFile(`${base}.json`, 'utf8').then((text) => JSON.parse(text) as ClipLabel, () => undefined);
    if (kept?.build === build) {
      const audio = await readFile(`${base}.ulaw`).catch(() => undefined);
      if (audio && audio.length === (kept.durationMs * CORPUS_RATE) / 1000) {
        clips.push({ label: kept, audio });
        continue;
      }
    }
    const { audio, label } = render(spec, build);
    const encoded = phoneBand(audio);
    // Written under temporary names and renamed, so a run stopped halfway leaves no half clip.
    await writeFile(`${base}.ulaw.tmp`, encoded);
    await writeFile(`${base}.json.tmp`, `${JSON.stringify(label, null, 1)}\n`);
    await rename(`${base}.ulaw.tmp`, `${base}.ulaw`);
    await rename(`${base}.json.tmp`, `${base}.json`);
    clips.push({ label, audio: encoded });
    built++;
  }
  return { dir, clips, built };
}
