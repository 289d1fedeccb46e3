import { createDevProvider } from '../../llm/dev.js';
import type { ChatMessage } from '../../llm/types.js';
import { FRAME_MS, SAMPLE_RATE, voicedSpeech } from '../audio.js';
import { SAY_EXACTLY, type RealtimeOptions, type RealtimeProvider, type RealtimeSession, type SttOptions, type SttProvider, type SttStream, type TtsProvider } from './types.js';
import { EnergyVad } from '../hearing/turns.js';

/**
 * Speech providers that need no network, named `dev` in the catalog and in logs.
 * - STT: each utterance the VAD detects becomes the next scripted transcript for the call when a
 *   script is given (tests), otherwise a placeholder naming its length. Interim results reveal one
 *   word per 100 ms of speech, as a live transcriber would.
 * - TTS: speech-like voiced audio of about the right length for the text (see `voicedSpeech`).
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

/** A stable pitch per voice, so two dev voices sound different. */
function pitchOf(voice: string): number {
  let hash = 0;
  for (const char of voice) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return 110 + (hash % 90);
}

const CHUNK_SAMPLES = SAMPLE_RATE / 5;

export function createDevTts(): TtsProvider {
  return {
    name: 'dev',
    async *synthesize({ text, voice, speed, signal }) {
      const audio = voicedSpeech(text, speed, pitchOf(voice));
      for (let offset = 0; offset < audio.length && !signal.aborted; offset += CHUNK_SAMPLES) {
        yield audio.subarray(offset, Math.min(audio.length, offset + CHUNK_SAMPLES));
      }
    },
  };
}

export function createDevRealtime(script?: TranscriptScript): RealtimeProvider {
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
          if (options.output === 'audio') emit({ type: 'audio', responseId, itemId, samples: voicedSpeech(text, 1, 160) });
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
