import { createDevProvider } from '../../llm/dev.js';
import type { ChatMessage } from '../../llm/types.js';
import { FRAME_MS, SAMPLE_RATE, voicedSpeech } from '../audio.js';
import { SAY_EXACTLY, type RealtimeOptions, type RealtimeProvider, type RealtimeSession, type SttOptions, type SttProvider, type SttStream, type TtsProvider } from './types.js';
import { EnergyVad } from '../hearing/turns.js';
import { SynthesizerUnavailable, type EspeakSynthesizer } from './espeak.js';

/**
 * Speech providers that need no network, named `dev` in the catalog and in logs.
 * - STT: each utterance the VAD detects becomes the next scripted transcript for the call when a
 *   script is given (tests), otherwise a placeholder naming its length. Interim results reveal one
 *   word per 100 ms of speech, as a live transcriber would.
 * - TTS: the words spoken by espeak-ng (offline, in a worker thread; see `espeak.ts`) in the
 *   catalog voice's language, or, without it, speech-like voiced audio of about the right length.
 * - Realtime: the same pieces behind the realtime interface: its own VAD ends a turn after the
 *   configured silence, the dev model answers (and calls functions), the dev voice speaks.
 */

export type TranscriptScript = (callId: number, utterance: number) => string | undefined;

const WORD_MS = 100;

export function createDevStt(script?: TranscriptScript): SttProvider {
  return {
    name: 'dev',
    open(options: SttOptions): SttStream {
      let utterance = 0;
      let active: { words: string[]; speechMs: number; revealed: number } | undefined;
      const settle = () => {
        if (!active) return;
        const { words, speechMs } = active;
        active = undefined;
        const text = words.length > 0 ? words.join(' ') : `(caller speech, ${(speechMs / 1000).toFixed(1)} s)`;
        options.onTranscript({ text, final: true, language: options.languages[0], wordless: words.length === 0 });
      };
      return {
        write(_frame, speech) {
          if (!speech) return;
          if (!active) {
            utterance++;
            const scripted = script?.(options.callId, utterance);
            active = { words: scripted ? scripted.split(/\s+/).filter(Boolean) : [], speechMs: 0, revealed: 0 };
          }
          active.speechMs += FRAME_MS;
          const revealed = active.words.length > 0 ? Math.min(active.words.length, Math.floor(active.speechMs / WORD_MS)) : Math.floor(active.speechMs / 300);
          if (revealed > active.revealed) {
            active.revealed = revealed;
            const text = active.words.length > 0 ? active.words.slice(0, revealed).join(' ') : Array.from({ length: revealed }, () => 'speech').join(' ');
            options.onTranscript({ text, final: false, language: options.languages[0], wordless: active.words.length === 0 });
          }
        },
        finalize: settle,
        close() {
          active = undefined;
        },
      };
    },
  };
}

/** A stable hash of a voice id, so each dev voice keeps its own pitch and variant. */
function hashOf(voice: string): number {
  let hash = 0;
  for (const char of voice) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return hash;
}

/** A stable pitch per voice for the tone, so two dev voices sound different. */
function pitchOf(voice: string): number {
  return 110 + (hashOf(voice) % 90);
}

const CHUNK_SAMPLES = SAMPLE_RATE / 5;

/** espeak-ng voices by ISO 639-1 code where the names differ; other codes are espeak's own names. */
const ESPEAK_VOICES: Readonly<Record<string, string>> = { en: 'en-us', pt: 'pt-br', no: 'nb', zh: 'cmn', fr: 'fr-fr' };

export type VoiceGender = 'female' | 'male' | 'neutral';

/**
 * The espeak-ng voice for a catalog voice: its language's voice (English for a language espeak
 * does not know, the thread checks), a female or male variant by the catalog voice's gender, and a
 * base pitch of its own (44-56) so two voices of one language and gender still differ.
 */
export function espeakVoice(language: string, voice: string, gender: VoiceGender | undefined): { voice: string; pitch: number } {
  const base = ESPEAK_VOICES[language] ?? (/^[a-z]{2,3}$/.test(language) ? language : 'en-us');
  const hash = hashOf(voice);
  const variant = gender === 'female' ? `+f${1 + (hash % 4)}` : gender === 'male' ? `+m${1 + (hash % 4)}` : '';
  return { voice: `${base}${variant}`, pitch: 44 + (hash % 13) };
}

/** espeak-ng's speaking rate at speed 1, in words per minute. */
const ESPEAK_WORDS_PER_MINUTE = 165;

export interface DevTtsOptions {
  /** Speaks the words; without it (or when it cannot load) the dev voice is a tone of the right length. */
  readonly synthesizer?: EspeakSynthesizer;
  /** The catalog gender of a provider voice id, for a female or male espeak variant. */
  readonly genderOf?: (voice: string) => Promise<VoiceGender | undefined>;
}

/** The tone of `text` in chunks: speech-like voiced audio of about the right length (see `voicedSpeech`). */
function* hum(text: string, speed: number, voice: string): Iterable<Int16Array> {
  const audio = voicedSpeech(text, speed, pitchOf(voice));
  for (let offset = 0; offset < audio.length; offset += CHUNK_SAMPLES) yield audio.subarray(offset, Math.min(audio.length, offset + CHUNK_SAMPLES));
}

export function createDevTts(options: DevTtsOptions = {}): TtsProvider {
  const { synthesizer, genderOf } = options;
  return {
    name: 'dev',
    async *synthesize({ text, voice, language, speed, signal }) {
      if (synthesizer) {
        let spoke = false;
        try {
          const gender = await genderOf?.(voice).catch(() => undefined);
          const chosen = espeakVoice(language, voice, gender);
          for await (const chunk of synthesizer.speak(text, { voice: chosen.voice, pitch: chosen.pitch, rate: Math.round(ESPEAK_WORDS_PER_MINUTE * speed), signal })) {
            spoke = true;
            yield chunk;
          }
          return;
        } catch (error) {
          // Half a sentence is not said again as a tone; a sentence not begun is hummed.
          if (!(error instanceof SynthesizerUnavailable) || spoke) throw error;
        }
      }
      for (const chunk of hum(text, speed, voice)) {
        if (signal.aborted) return;
        yield chunk;
      }
    },
  };
}

/** `voice`: the dev synthesizer that speaks the model's own audio (multimodal) when it speaks words; the tone otherwise. */
export function createDevRealtime(script?: TranscriptScript, voice?: { readonly tts: TtsProvider; readonly speaks: boolean }): RealtimeProvider {
  return {
    name: 'dev',
    connect(options: RealtimeOptions): RealtimeSession {
      const model = createDevProvider();
      const vad = new EnergyVad();
      const history: ChatMessage[] = [{ role: 'system', content: options.instructions }];
      let utterance = 0;
      let speaking = false;
      let silenceMs = 0;
      let responses = 0;
      let current: AbortController | undefined;
      let closed = false;
      const emit = options.onEvent;

      async function respond(instructions: string | undefined, tag: string | undefined): Promise<void> {
        current?.abort();
        const abort = new AbortController();
        current = abort;
        const responseId = `resp_dev_${++responses}`;
        // Like a realtime vendor, a cancelled response still reports that it is done.
        abort.signal.addEventListener('abort', () => closed || emit({ type: 'response_done', responseId, status: 'cancelled' }), { once: true });
        const itemId = `item_dev_${responses}`;
        emit({ type: 'response_started', responseId, tag });
        const fixed = instructions?.startsWith(SAY_EXACTLY) ? instructions.slice(SAY_EXACTLY.length).replace(/^"|"$/g, '') : undefined;
        const messages = instructions ? [...history, { role: 'user' as const, content: instructions }] : history;
        let text = fixed ?? '';
        let calls: { id: string; name: string; arguments: string }[] = [];
        if (fixed === undefined) {
          for await (const event of model.stream({ model: options.model, messages, functions: options.tools, temperature: options.temperature })) {
            if (abort.signal.aborted || closed) return;
            if (event.type === 'text') text += event.delta;
            else calls = event.calls;
          }
        }
        if (abort.signal.aborted || closed) return;
        if (calls.length > 0) {
          history.push({ role: 'assistant', content: null, toolCalls: calls });
          for (const call of calls) emit({ type: 'function_call', responseId, callId: call.id, name: call.name, arguments: call.arguments });
        } else {
          history.push({ role: 'assistant', content: text });
          emit({ type: 'text', responseId, itemId, delta: text });
          if (options.output === 'audio' && voice?.speaks) {
            for await (const samples of voice.tts.synthesize({ text, voice: options.voice, language: 'en', speed: options.speed, stability: 0.5, similarity: 0.75, emotion: false, signal: abort.signal })) {
              if (abort.signal.aborted || closed) return;
              emit({ type: 'audio', responseId, itemId, samples });
            }
          } else if (options.output === 'audio') emit({ type: 'audio', responseId, itemId, samples: voicedSpeech(text, 1, 160) });
        }
        current = undefined;
        emit({ type: 'response_done', responseId, status: 'completed' });
      }

      const run = (instructions?: string, tag?: string) =>
        void respond(instructions, tag).catch((error: unknown) => emit({ type: 'error', message: error instanceof Error ? error.message : String(error), fatal: false }));

      return {
        appendAudio(frame) {
          if (closed) return;
          const speech = vad.process(frame);
          if (speech && !speaking) {
            speaking = true;
            utterance++;
            emit({ type: 'speech_started' });
          }
          if (speaking) {
            silenceMs = speech ? 0 : silenceMs + FRAME_MS;
            if (silenceMs >= options.silenceMs) {
              speaking = false;
              silenceMs = 0;
              const scripted = script?.(options.callId, utterance);
              const text = scripted ?? '(caller speech)';
              history.push({ role: 'user', content: text });
              emit({ type: 'speech_stopped' });
              emit({ type: 'user_transcript', text, wordless: scripted === undefined });
            }
          }
        },
        createResponse: (instructions, tag) => run(instructions, tag),
        cancelResponse() {
          current?.abort();
        },
        truncate() {},
        addMessage(role, text) {
          history.push({ role, content: text });
        },
        sendFunctionResult(callId, output) {
          history.push({ role: 'tool', content: JSON.stringify(output), toolCallId: callId });
        },
        close() {
          closed = true;
          current?.abort();
        },
      };
    },
  };
}
