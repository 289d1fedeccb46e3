/**
 * What the turn-taking corpus holds, as data: each clip is what a caller says (or a sound the line
 * carries) on a scripted timeline, built by build.ts. Four kinds:
 * - `pause`: a sentence with one mid-sentence pause of 500, 700 or 1,000 ms (many of them before
 *   a number or an address being read out); the caller's turn has not ended in the pause.
 * - `backchannel`: "mm-hmm", "yeah", "ja", "genau"... at several speaking rates (so several
 *   lengths), to be said over the agent; it must not take the turn.
 * - `interruption`: a real barge-in ("wait, stop, I have a question"), over the agent.
 * - `noise`: a cough, a door slam, music or a television in the room, no caller speech.
 * Some speech clips carry background speech or music at 20 dB and 10 dB SNR.
 */

export type ClipKind = 'pause' | 'backchannel' | 'interruption' | 'noise';
/** Sounds the builder makes with sox (or, for `tv`, from espeak-ng voices far from the phone). */
export type SoundName = 'cough' | 'cough-long' | 'door' | 'door-far' | 'music' | 'tv';
export type Part = { readonly say: string } | { readonly pause: number } | { readonly sound: SoundName; readonly levelDb: number };

export interface ClipSpec {
  readonly id: string;
  readonly kind: ClipKind;
  /** ISO 639-1 code of the catalog language spoken. */
  readonly language: string;
  /** espeak-ng voice with variant, e.g. `en-us+m3`. */
  readonly voice: string;
  /** Speaking rate, words per minute. */
  readonly rate: number;
  readonly parts: readonly Part[];
  /** Background under the whole clip, at `snrDb` below the caller's speech. */
  readonly background?: { readonly sound: 'tv' | 'music'; readonly snrDb: number };
}

export const PAUSES_MS = [500, 700, 1_000] as const;

const VOICES: Record<string, readonly string[]> = { en: ['en-us+m3', 'en-gb+f3'], de: ['de+m1', 'de+f2'], fr: ['fr+m2'] };

/** Sentences split where a caller pauses to think or to look something up. */
const PAUSED: Record<string, ReadonlyArray<readonly [string, string]>> = {
  en: [
    ['My order number is', 'four four one seven, and it has not arrived.'],
    ['Please send it to', 'twenty two Baker Street, London.'],
    ['I would like to', 'change the date of my appointment.'],
    ['My phone number is oh one seven', 'nine three, four eight two.'],
  ],
  de: [
    ['Meine Kundennummer ist', 'drei acht null fünf sieben.'],
    ['Bitte schicken Sie es an die', 'Hauptstraße zwölf in Berlin.'],
  ],
  fr: [['Mon numéro de commande est', 'quatre cent douze.']],
};

const BACKCHANNELS: Record<string, readonly string[]> = {
  en: ['mm-hmm', 'yeah', 'right', 'okay', 'uh-huh', 'yeah, right', 'okay, sure'],
  de: ['ja', 'genau', 'ja, genau', 'mhm'],
  fr: ['oui', "d'accord"],
};

const INTERRUPTIONS: Record<string, readonly string[]> = {
  en: ['wait, stop, I have a question', 'sorry, that is not what I asked', 'hold on, can you repeat that', 'no, I want to cancel my order'],
  de: ['Moment, ich habe eine Frage', 'Halt, das stimmt so nicht'],
  fr: ["attendez, j'ai une question"],
};

const BACKGROUNDS = [undefined, { sound: 'tv', snrDb: 20 }, { sound: 'music', snrDb: 10 }] as const;

const slug = (text: string) => text.toLowerCase().normalize('NFD').replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
const bgSlug = (background: ClipSpec['background']) => (background ? `-${background.sound}${background.snrDb}` : '');

function pauseClips(): ClipSpec[] {
  const clips: ClipSpec[] = [];
  for (const [language, sentences] of Object.entries(PAUSED)) {
    for (const [s, [before, after]] of sentences.entries()) {
      for (const [v, voice] of VOICES[language]!.entries()) {
        for (const rate of language === 'fr' ? [160] : [150, 190]) {
          // Background on the first voice at its slower rate: the noisy lines of every sentence.
          const backgrounds = v === 0 && rate === 150 ? BACKGROUNDS : [undefined];
          for (const background of backgrounds) {
            for (const pause of PAUSES_MS) {
              clips.push({ id: `pause-${language}${s}-${voice.replace('+', '_')}-${rate}-${pause}${bgSlug(background)}`, kind: 'pause', language, voice, rate, parts: [{ say: before }, { pause }, { say: after }], background });
            }
          }
        }
      }
    }
  }
  return clips;
}

function overAgentClips(kind: 'backchannel' | 'interruption', texts: Record<string, readonly string[]>, rates: readonly number[], backgrounds: readonly ClipSpec['background'][]): ClipSpec[] {
  const clips: ClipSpec[] = [];
  for (const [language, list] of Object.entries(texts)) {
    for (const text of list) {
      for (const voice of VOICES[language]!) {
        for (const rate of rates) {
          for (const background of backgrounds) clips.push({ id: `${kind}-${language}-${slug(text)}-${voice.replace('+', '_')}-${rate}${bgSlug(background)}`, kind, language, voice, rate, parts: [{ say: text }], background });
        }
      }
    }
  }
  return clips;
}

function noiseClips(): ClipSpec[] {
  const sounds: Array<[SoundName, number[]]> = [
    ['cough', [-14, -22]],
    ['cough-long', [-16, -24]],
    ['door', [-8, -18]],
    ['door-far', [-20]],
    ['music', [-22, -30]],
    ['tv', [-24, -32]],
  ];
  return sounds.flatMap(([sound, levels]) => levels.map((levelDb) => ({ id: `noise-${sound}${levelDb}`, kind: 'noise' as const, language: 'en', voice: 'en-us', rate: 170, parts: [{ sound, levelDb }] })));
}

/** Every clip of the corpus, in a stable order. */
export function corpusPlan(): ClipSpec[] {
  return [
    ...pauseClips(),
    ...overAgentClips('backchannel', BACKCHANNELS, [130, 200], [undefined]),
    ...overAgentClips('interruption', INTERRUPTIONS, [170], BACKGROUNDS),
    ...noiseClips(),
  ];
}
