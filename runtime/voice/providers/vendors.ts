import WebSocket from 'ws';
import { stallGuard } from '../../net/stall.js';
import { bytesToSamples, samplesToBytes, SAMPLE_RATE } from '../audio.js';
import { Resampler, type RealtimeEvent, type RealtimeOptions, type RealtimeProvider, type RealtimeSession, type SttOptions, type SttProvider, type SttStream, type TtsProvider, type TtsRequest } from './types.js';
import { semanticEagerness } from '../hearing/turns.js';

/** A vendor's JSON text frame when it is an object (`null`, a number or an array is not a message). */
function parseObject(data: WebSocket.RawData): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(data.toString());
  } catch {
    return undefined;
  }
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

const objectOr = (value: unknown): Record<string, unknown> => (value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {});

/**
 * Handles one frame of a vendor socket. What it sets off (the call's reaction included) runs in a
 * ws listener, where an exception would end the process and every call in it: one that escapes
 * fails this call's stream instead.
 */
function vendorMessage(handle: () => void, failed: (error: Error) => void): void {
  try {
    handle();
  } catch (error) {
    try {
      failed(error instanceof Error ? error : new Error(String(error)));
    } catch {
      // The call's own failure handling threw as well: the stream is closed by then, and the call's end is on its way.
    }
  }
}

/**
 * Speech vendors over their public wire protocols:
 * - Deepgram live transcription (WebSocket `/v1/listen`, linear16 16 kHz, interim results,
 *   `Finalize` at the end of a turn, `language=multi` when secondary languages are set).
 * - ElevenLabs streaming TTS (`POST /v1/text-to-speech/{voice}/stream?output_format=pcm_16000`).
 * - OpenAI TTS (`POST /v1/audio/speech`, `response_format: pcm`, 24 kHz resampled to 16 kHz).
 * - OpenAI Realtime (WebSocket `/v1/realtime?model=`, pcm16 24 kHz both ways, server VAD with
 *   `create_response: false` so the call actor decides when to answer).
 */

export interface FirstByteProbe {
  (kind: 'stt' | 'tts' | 'realtime', provider: string, ms: number): void;
}

/** PCM16 byte chunks of any length (odd boundaries included) as whole samples. */
async function* pcmChunks(body: ReadableStream<Uint8Array>, signal: AbortSignal): AsyncIterable<Int16Array> {
  let carry: Uint8Array | undefined;
  const reader = body.getReader();
  try {
    while (!signal.aborted) {
      const { done, value } = await reader.read();
      if (done) break;
      let bytes = value;
      if (carry) {
        const joined = new Uint8Array(carry.length + bytes.length);
        joined.set(carry);
        joined.set(bytes, carry.length);
        bytes = joined;
        carry = undefined;
      }
      if (bytes.length % 2 === 1) {
        carry = bytes.slice(bytes.length - 1);
        bytes = bytes.subarray(0, bytes.length - 1);
      }
      if (bytes.length > 0) yield bytesToSamples(bytes).slice();
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** A voice that stops sending is given up after this (fetch has no timeout of its own once headers arrive). */
const TTS_STALL_MS = 10_000;

/** Streams a TTS response's PCM as whole samples, failing clearly when the vendor goes quiet. */
async function* guardedSpeech(vendor: string, request: TtsRequest, stallMs: number, open: (signal: AbortSignal) => Promise<Response>): AsyncIterable<Int16Array> {
  const guard = stallGuard(request.signal, stallMs);
  try {
    const response = await open(guard.signal);
    if (!response.ok || !response.body) throw await failure(response, vendor);
    guard.touch();
    for await (const chunk of pcmChunks(response.body, guard.signal)) {
      guard.touch();
      yield chunk;
    }
    if (guard.stalled) throw new Error(`${vendor} sent no audio for ${Math.round(stallMs / 1000)} s`);
  } catch (error) {
    if (guard.stalled) throw new Error(`${vendor} sent no audio for ${Math.round(stallMs / 1000)} s`, { cause: error });
    throw error;
  } finally {
    guard.dispose();
  }
}

async function failure(response: Response, vendor: string): Promise<Error> {
  const text = await response.text().catch(() => '');
  return new Error(`${vendor} answered HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`);
}

export function createElevenLabsTts(settings: { apiKey: string; url: string; model?: string; stallMs?: number }, probe?: FirstByteProbe): TtsProvider {
  return {
    name: 'elevenlabs',
    async *synthesize(request: TtsRequest) {
      const started = performance.now();
      const audio = guardedSpeech('ElevenLabs', request, settings.stallMs ?? TTS_STALL_MS, (signal) => fetch(`${settings.url}/v1/text-to-speech/${encodeURIComponent(request.voice)}/stream?output_format=pcm_16000`, {
        method: 'POST',
        headers: { 'xi-api-key': settings.apiKey, 'content-type': 'application/json', accept: 'audio/pcm' },
        body: JSON.stringify({
          text: request.text,
          model_id: settings.model ?? 'eleven_flash_v2_5',
          language_code: request.language,
          voice_settings: { stability: request.stability, similarity_boost: request.similarity, style: request.emotion ? 0.3 : 0, use_speaker_boost: true, speed: request.speed },
        }),
        signal,
      }));
      let first = true;
      for await (const chunk of audio) {
        if (first) probe?.('tts', 'elevenlabs', performance.now() - started);
        first = false;
        yield chunk;
      }
    },
  };
}

export function createOpenAiTts(settings: { apiKey: string; url: string; model?: string; stallMs?: number }, probe?: FirstByteProbe): TtsProvider {
  return {
    name: 'openai',
    async *synthesize(request: TtsRequest) {
      const started = performance.now();
      const audio = guardedSpeech('OpenAI TTS', request, settings.stallMs ?? TTS_STALL_MS, (signal) => fetch(`${settings.url}/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: settings.model ?? 'gpt-4o-mini-tts',
          input: request.text,
          voice: request.voice,
          response_format: 'pcm',
          speed: request.speed,
          ...(request.emotion ? { instructions: 'Speak warmly and expressively.' } : {}),
        }),
        signal,
      }));
      const resampler = new Resampler(24_000, SAMPLE_RATE);
      let first = true;
      for await (const chunk of audio) {
        if (first) probe?.('tts', 'openai', performance.now() - started);
        first = false;
        yield resampler.process(chunk);
      }
    },
  };
}

/** Deepgram closes a stream that gets no audio for 10 s; an idle one (ringing, a held call) says it is alive. */
const DEEPGRAM_KEEPALIVE_MS = 5_000;

export function createDeepgramStt(settings: { apiKey: string; url: string; model?: string; keepAliveMs?: number }, probe?: FirstByteProbe): SttProvider {
  return {
    name: 'deepgram',
    open(options: SttOptions): SttStream {
      const query = new URLSearchParams({
        model: settings.model ?? 'nova-3',
        encoding: 'linear16',
        sample_rate: String(SAMPLE_RATE),
        channels: '1',
        interim_results: 'true',
        punctuate: 'true',
        smart_format: 'true',
        endpointing: 'false',
        language: options.languages.length > 1 ? 'multi' : options.languages[0] ?? 'en',
      });
      const socket = new WebSocket(`${settings.url}/v1/listen?${query}`, { headers: { authorization: `Token ${settings.apiKey}` } });
      const queue: Array<Buffer | string> = [];
      let closed = false;
      let sentAt: number | undefined;
      let lastSent = performance.now();
      const send = (data: Buffer | string) => {
        lastSent = performance.now();
        if (socket.readyState === WebSocket.OPEN) socket.send(data);
        else if (socket.readyState === WebSocket.CONNECTING && queue.length < 500) queue.push(data);
      };
      const keepAliveMs = settings.keepAliveMs ?? DEEPGRAM_KEEPALIVE_MS;
      const keepAlive = setInterval(() => {
        if (socket.readyState === WebSocket.OPEN && performance.now() - lastSent >= keepAliveMs) send(JSON.stringify({ type: 'KeepAlive' }));
      }, keepAliveMs / 2);
      keepAlive.unref();
      socket.on('close', () => clearInterval(keepAlive));
      socket.on('open', () => {
        for (const data of queue.splice(0)) socket.send(data);
      });
      socket.on('message', (data, isBinary) => {
        if (isBinary || closed) return;
        vendorMessage(() => {
          const message = parseObject(data);
          if (message?.type !== 'Results') return;
          const channel = objectOr(message.channel);
          const alternative = objectOr(Array.isArray(channel.alternatives) ? channel.alternatives[0] : undefined);
          const text = typeof alternative.transcript === 'string' ? alternative.transcript : '';
          if (sentAt !== undefined && text) {
            probe?.('stt', 'deepgram', performance.now() - sentAt);
            sentAt = undefined;
          }
          const languages = Array.isArray(alternative.languages) ? alternative.languages : [];
          const language = typeof languages[0] === 'string' ? languages[0] : typeof channel.detected_language === 'string' ? channel.detected_language : '';
          options.onTranscript({ text, final: message.is_final === true, ...(language ? { language: language.slice(0, 2) } : {}) });
        }, (error) => {
          // Closed first: the call's reaction may throw too, and no further frame may reach it.
          const wasClosed = closed;
          closed = true;
          socket.terminate();
          if (!wasClosed) options.onError(error);
        });
      });
      socket.on('error', (error) => {
        if (!closed) options.onError(error);
        closed = true;
      });
      socket.on('close', (code) => {
        if (!closed && code !== 1000) options.onError(new Error(`Deepgram closed the stream (${code})`));
        closed = true;
      });
      return {
        write(frame, speech) {
          if (closed) return;
          if (speech && sentAt === undefined) sentAt = performance.now();
          send(Buffer.from(samplesToBytes(frame)));
        },
        finalize() {
          send(JSON.stringify({ type: 'Finalize' }));
        },
        close() {
          clearInterval(keepAlive);
          if (closed) return;
          closed = true;
          if (socket.readyState === WebSocket.OPEN) {
            socket.send(JSON.stringify({ type: 'CloseStream' }));
            socket.close(1000);
          } else socket.terminate();
        },
      };
    },
  };
}

export function createOpenAiRealtime(settings: { apiKey: string; realtimeUrl: string }, probe?: FirstByteProbe): RealtimeProvider {
  return {
    name: 'openai',
    connect(options: RealtimeOptions): RealtimeSession {
      const socket = new WebSocket(`${settings.realtimeUrl}?model=${encodeURIComponent(options.model)}`, {
        headers: { authorization: `Bearer ${settings.apiKey}`, 'OpenAI-Beta': 'realtime=v1' },
      });
      const queue: string[] = [];
      const up = new Resampler(SAMPLE_RATE, 24_000);
      const down = new Resampler(24_000, SAMPLE_RATE);
      let closed = false;
      let requestedAt: number | undefined;
      const emit = (event: RealtimeEvent) => {
        if (!closed) options.onEvent(event);
      };
      const send = (message: Record<string, unknown>) => {
        const text = JSON.stringify(message);
        if (socket.readyState === WebSocket.OPEN) socket.send(text);
        else if (socket.readyState === WebSocket.CONNECTING && queue.length < 1_000) queue.push(text);
      };
      send({
        type: 'session.update',
        session: {
          modalities: options.output === 'audio' ? ['audio', 'text'] : ['text'],
          instructions: options.instructions,
          voice: options.voice,
          ...(options.output === 'audio' ? { speed: options.speed } : {}),
          input_audio_format: 'pcm16',
          output_audio_format: 'pcm16',
          input_audio_transcription: { model: 'whisper-1' },
          turn_detection:
            options.endpointType === 'ai'
              ? { type: 'semantic_vad', eagerness: semanticEagerness(options.silenceMs), create_response: false, interrupt_response: false }
              : { type: 'server_vad', threshold: options.turnDetectionThreshold ?? 0.5, prefix_padding_ms: 300, silence_duration_ms: options.silenceMs, create_response: false, interrupt_response: false },
          tools: options.tools.map((fn) => ({ type: 'function', name: fn.name, description: fn.description, parameters: fn.parameters })),
          tool_choice: 'auto',
          temperature: Math.min(1.2, Math.max(0.6, options.temperature)),
        },
      });
      socket.on('open', () => {
        for (const text of queue.splice(0)) socket.send(text);
      });
      socket.on('message', (data) => {
        if (closed) return;
        vendorMessage(() => realtimeMessage(data), (error) => {
          // Closed first: the call's reaction may throw too, and no further frame may reach it.
          const wasClosed = closed;
          closed = true;
          socket.terminate();
          if (!wasClosed) options.onEvent({ type: 'error', message: error.message, fatal: true });
        });
      });
      const realtimeMessage = (data: WebSocket.RawData) => {
        const event = parseObject(data) as Record<string, any> | undefined;
        if (!event) return;
        switch (event.type) {
          case 'input_audio_buffer.speech_started':
            return emit({ type: 'speech_started' });
          case 'input_audio_buffer.speech_stopped':
            return emit({ type: 'speech_stopped' });
          case 'conversation.item.input_audio_transcription.completed':
            return emit({ type: 'user_transcript', text: String(event.transcript ?? '').trim() });
          case 'response.created':
            return emit({ type: 'response_started', responseId: String(event.response?.id ?? ''), tag: typeof event.response?.metadata?.turn === 'string' ? event.response.metadata.turn : undefined });
          case 'response.audio.delta': {
            if (requestedAt !== undefined) {
              probe?.('realtime', 'openai', performance.now() - requestedAt);
              requestedAt = undefined;
            }
            const bytes = Buffer.from(String(event.delta ?? ''), 'base64');
            return emit({ type: 'audio', responseId: String(event.response_id ?? ''), itemId: String(event.item_id ?? ''), samples: down.process(bytesToSamples(bytes).slice()) });
          }
          case 'response.audio_transcript.delta':
          case 'response.text.delta':
            return emit({ type: 'text', responseId: String(event.response_id ?? ''), itemId: String(event.item_id ?? ''), delta: String(event.delta ?? '') });
          case 'response.function_call_arguments.done':
            return emit({ type: 'function_call', responseId: String(event.response_id ?? ''), callId: String(event.call_id ?? ''), name: String(event.name ?? ''), arguments: String(event.arguments ?? '{}') });
          case 'response.done': {
            const status = String(event.response?.status ?? 'completed');
            return emit({ type: 'response_done', responseId: String(event.response?.id ?? ''), status: (['completed', 'cancelled', 'failed', 'incomplete'].includes(status) ? status : 'completed') as 'completed' });
          }
          case 'error':
            return emit({ type: 'error', message: String(event.error?.message ?? 'realtime error'), fatal: false });
          default:
        }
      };
      socket.on('error', (error) => emit({ type: 'error', message: error.message, fatal: true }));
      socket.on('close', (code) => {
        if (!closed && code !== 1000) emit({ type: 'error', message: `The realtime session closed (${code})`, fatal: true });
        closed = true;
      });
      return {
        appendAudio(frame) {
          send({ type: 'input_audio_buffer.append', audio: samplesToBytes(up.process(frame)).toString('base64') });
        },
        createResponse(instructions, tag) {
          requestedAt = performance.now();
          send({ type: 'response.create', response: { ...(instructions ? { instructions } : {}), ...(tag ? { metadata: { turn: tag } } : {}) } });
        },
        cancelResponse() {
          send({ type: 'response.cancel' });
        },
        truncate(itemId, audioEndMs) {
          send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: Math.max(0, Math.round(audioEndMs)) });
        },
        addMessage(role, text) {
          send({ type: 'conversation.item.create', item: { type: 'message', role, content: [{ type: role === 'user' ? 'input_text' : 'text', text }] } });
        },
        sendFunctionResult(callId, output) {
          send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: callId, output: JSON.stringify(output) } });
        },
        close() {
          if (closed) return;
          closed = true;
          if (socket.readyState === WebSocket.OPEN) socket.close(1000);
          else socket.terminate();
        },
      };
    },
  };
}
