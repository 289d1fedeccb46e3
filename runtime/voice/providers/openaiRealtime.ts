import WebSocket from 'ws';
import { bytesToSamples, samplesToBytes, SAMPLE_RATE } from '../audio.js';
import { semanticEagerness } from '../hearing/turns.js';
import { Resampler, type FirstByteProbe, type RealtimeEvent, type RealtimeOptions, type RealtimeProvider, type RealtimeSession } from './types.js';
import { parseObject, vendorMessage } from './wire.js';

/**
 * OpenAI Realtime: WebSocket `/v1/realtime?model=`, pcm16 24 kHz both ways, server VAD with
 * `create_response: false` so the call actor decides when to answer.
 */

/** The `session.update` that opens a session: voice, formats, turn detection and tools. */
function sessionUpdate(options: RealtimeOptions): Record<string, unknown> {
  return {
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
  };
}

/**
 * One server event in the engine's words; undefined for events the engine does not use.
 * `audio` turns the vendor's 24 kHz base64 PCM into call samples (the resampler keeps state).
 */
function realtimeEvent(event: Record<string, any>, audio: (base64: string) => Int16Array): RealtimeEvent | undefined {
  switch (event.type) {
    case 'input_audio_buffer.speech_started':
      return { type: 'speech_started' };
    case 'input_audio_buffer.speech_stopped':
      return { type: 'speech_stopped' };
    case 'conversation.item.input_audio_transcription.completed':
      return { type: 'user_transcript', text: String(event.transcript ?? '').trim() };
    case 'response.created':
      return { type: 'response_started', responseId: String(event.response?.id ?? ''), tag: typeof event.response?.metadata?.turn === 'string' ? event.response.metadata.turn : undefined };
    case 'response.audio.delta':
      return { type: 'audio', responseId: String(event.response_id ?? ''), itemId: String(event.item_id ?? ''), samples: audio(String(event.delta ?? '')) };
    case 'response.audio_transcript.delta':
    case 'response.text.delta':
      return { type: 'text', responseId: String(event.response_id ?? ''), itemId: String(event.item_id ?? ''), delta: String(event.delta ?? '') };
    case 'response.function_call_arguments.done':
      return { type: 'function_call', responseId: String(event.response_id ?? ''), callId: String(event.call_id ?? ''), name: String(event.name ?? ''), arguments: String(event.arguments ?? '{}') };
    case 'response.done': {
      const status = String(event.response?.status ?? 'completed');
      return { type: 'response_done', responseId: String(event.response?.id ?? ''), status: (['completed', 'cancelled', 'failed', 'incomplete'].includes(status) ? status : 'completed') as 'completed' };
    }
    case 'error':
      return { type: 'error', message: String(event.error?.message ?? 'realtime error'), fatal: false };
    default:
      return undefined;
  }
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
      const audio = (base64: string) => {
        if (requestedAt !== undefined) {
          probe?.('realtime', 'openai', performance.now() - requestedAt);
          requestedAt = undefined;
        }
        return down.process(bytesToSamples(Buffer.from(base64, 'base64')).slice());
      };
      send(sessionUpdate(options));
      socket.on('open', () => {
        for (const text of queue.splice(0)) socket.send(text);
      });
      socket.on('message', (data) => {
        if (closed) return;
        vendorMessage(
          () => {
            const message = parseObject(data);
            const event = message && realtimeEvent(message, audio);
            if (event) emit(event);
          },
          (error) => {
            // Closed first: the call's reaction may throw too, and no further frame may reach it.
            const wasClosed = closed;
            closed = true;
            socket.terminate();
            if (!wasClosed) options.onEvent({ type: 'error', message: error.message, fatal: true });
          },
        );
      });
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
