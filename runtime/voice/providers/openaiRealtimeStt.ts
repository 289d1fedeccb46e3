import WebSocket from 'ws';
import type { Logger } from '../../logger.js';
import { FRAME_MS, SAMPLE_RATE, samplesToBytes } from '../audio.js';
import { Resampler, type FirstByteProbe, type SttOptions, type SttProvider, type SttStream } from './types.js';
import { objectOr, parseObject, vendorMessage } from './wire.js';
import { SegmentedTranscript, SpeechGate, type Segment } from './utterance.js';

/**
 * OpenAI's realtime transcription: WebSocket `/v1/realtime?intent=transcription`,
 * `transcription_session.update` (pcm16 24 kHz, the model, no server turn detection: hearing's VAD
 * decides), `input_audio_buffer.append` from just before the VAD's onset, a commit at each pause of
 * the caller's speech (so words come while the turn goes on) and at the end of the turn;
 * `conversation.item.input_audio_transcription.delta` are interim transcripts, `.completed` settle
 * a piece, and the end of the turn gives one final transcript once its pieces are in. A socket
 * that fails fails the stream (as Deepgram's does); a piece that fails is logged and has no words.
 */

export interface RealtimeTranscriberSettings {
  /** `wss://…/v1/realtime` */
  readonly realtimeUrl: string;
  readonly apiKey?: string;
  readonly model: string;
}

/** OpenAI refuses to commit less audio than this. */
const MIN_COMMIT_MS = 100;

export function createOpenAiRealtimeStt(settings: RealtimeTranscriberSettings, logger: Logger, probe?: FirstByteProbe): SttProvider {
  return {
    name: 'openai',
    finalWaitMs: 3_000,
    open(options: SttOptions): SttStream {
      const socket = new WebSocket(`${settings.realtimeUrl}?intent=transcription`, {
        headers: { ...(settings.apiKey ? { authorization: `Bearer ${settings.apiKey}` } : {}), 'OpenAI-Beta': 'realtime=v1' },
      });
      const queue: string[] = [];
      const up = new Resampler(SAMPLE_RATE, 24_000);
      const gate = new SpeechGate();
      const transcript = new SegmentedTranscript((t) => options.onTranscript(t));
      /** Commits sent and not yet acknowledged, oldest first, by the `event_id` they were sent with. */
      const committing: Array<{ eventId: string; segment: Segment; at: number }> = [];
      const items = new Map<string, { segment: Segment; at: number }>();
      let commits = 0;
      let closed = false;
      let bufferedMs = 0;
      let bufferedSpeech = false;
      let wasSpeech = false;

      const send = (message: Record<string, unknown>) => {
        const text = JSON.stringify(message);
        if (socket.readyState === WebSocket.OPEN) socket.send(text);
        else if (socket.readyState === WebSocket.CONNECTING && queue.length < 2_000) queue.push(text);
      };
      const commit = () => {
        const eventId = `commit_${++commits}`;
        committing.push({ eventId, segment: transcript.segment(), at: performance.now() });
        send({ type: 'input_audio_buffer.commit', event_id: eventId });
        bufferedMs = 0;
        bufferedSpeech = false;
      };
      const settle = (segment: Segment, text: string) => transcript.update(segment, text, true);
      const fail = (error: Error) => {
        const wasClosed = closed;
        closed = true;
        socket.terminate();
        if (!wasClosed) options.onError(error);
      };

      function handle(message: Record<string, any>): void {
        switch (message.type) {
          case 'input_audio_buffer.committed': {
            const pending = committing.shift();
            if (pending) items.set(String(message.item_id ?? ''), pending);
            return;
          }
          case 'conversation.item.input_audio_transcription.delta': {
            const item = items.get(String(message.item_id ?? ''));
            if (!item || typeof message.delta !== 'string') return;
            transcript.update(item.segment, item.segment.text + message.delta, false);
            return;
          }
          case 'conversation.item.input_audio_transcription.completed': {
            const item = items.get(String(message.item_id ?? ''));
            if (!item) return;
            items.delete(String(message.item_id));
            probe?.('stt', 'openai', performance.now() - item.at);
            settle(item.segment, typeof message.transcript === 'string' ? message.transcript : item.segment.text);
            return;
          }
          case 'conversation.item.input_audio_transcription.failed': {
            const item = items.get(String(message.item_id ?? ''));
            if (!item) return;
            items.delete(String(message.item_id));
            logger.warn({ callId: options.callId, provider: 'openai', code: objectOr(message.error).code }, 'transcription of an utterance failed; it has no words');
            settle(item.segment, '');
            return;
          }
          case 'error': {
            const error = objectOr(message.error);
            logger.warn({ callId: options.callId, provider: 'openai', code: error.code, type: error.type }, 'the realtime transcription refused an event');
            // A refused commit (too little audio) never gets its item: its piece has no words.
            const index = committing.findIndex((c) => c.eventId === error.event_id);
            if (index >= 0) settle(committing.splice(index, 1)[0]!.segment, '');
            return;
          }
          default:
        }
      }

      send({
        type: 'transcription_session.update',
        session: {
          input_audio_format: 'pcm16',
          input_audio_transcription: { model: settings.model, ...(options.languages.length === 1 ? { language: options.languages[0] } : {}) },
          turn_detection: null,
        },
      });
      socket.on('open', () => {
        for (const text of queue.splice(0)) socket.send(text);
      });
      socket.on('message', (data, isBinary) => {
        if (isBinary || closed) return;
        vendorMessage(() => {
          const message = parseObject(data);
          if (message) handle(message);
        }, fail);
      });
      socket.on('error', (error) => fail(error));
      socket.on('close', (code) => {
        if (!closed && code !== 1000) options.onError(new Error(`the realtime transcription closed (${code})`));
        closed = true;
      });

      return {
        write(frame, speech) {
          if (closed) return;
          const frames = gate.pass(frame, speech);
          for (const passed of frames) send({ type: 'input_audio_buffer.append', audio: samplesToBytes(up.process(passed)).toString('base64') });
          bufferedMs += frames.length * FRAME_MS;
          if (speech) bufferedSpeech = true;
          // A pause in the caller's speech: what came before it is transcribed while the turn goes on.
          if (wasSpeech && !speech && bufferedSpeech && bufferedMs >= MIN_COMMIT_MS) commit();
          wasSpeech = speech;
        },
        finalize() {
          if (closed) return;
          if (bufferedSpeech && bufferedMs >= MIN_COMMIT_MS) commit();
          else if (bufferedMs > 0) send({ type: 'input_audio_buffer.clear' });
          bufferedMs = 0;
          bufferedSpeech = false;
          wasSpeech = false;
          gate.close();
          // Not at once: hearing starts waiting for the final just after asking for it.
          queueMicrotask(() => transcript.finalize());
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
