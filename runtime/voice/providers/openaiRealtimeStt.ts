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

/**
 * The pieces of the caller's speech committed to the session, from their commit to their
 * transcript: a commit's item id comes with `input_audio_buffer.committed` (in commit order), its
 * words with the transcription events of that item.
 */
class CommittedPieces {
  /** Commits sent and not yet acknowledged, oldest first, by the `event_id` they were sent with. */
  private readonly committing: Array<{ eventId: string; segment: Segment; at: number }> = [];
  private readonly items = new Map<string, { segment: Segment; at: number }>();
  private commits = 0;

  constructor(
    private readonly transcript: SegmentedTranscript,
    private readonly warn: (fields: Record<string, unknown>, message: string) => void,
    private readonly took: (ms: number) => void,
  ) {}

  /** A piece about to be committed: the `event_id` to send its commit with. */
  commit(): string {
    const eventId = `commit_${++this.commits}`;
    this.committing.push({ eventId, segment: this.transcript.segment(), at: performance.now() });
    return eventId;
  }

  /** One server event of the session. */
  handle(message: Record<string, any>): void {
    const itemId = String(message.item_id ?? '');
    const item = this.items.get(itemId);
    switch (message.type) {
      case 'input_audio_buffer.committed': {
        const pending = this.committing.shift();
        if (pending) this.items.set(itemId, pending);
        return;
      }
      case 'conversation.item.input_audio_transcription.delta':
        if (item && typeof message.delta === 'string') this.transcript.update(item.segment, item.segment.text + message.delta, false);
        return;
      case 'conversation.item.input_audio_transcription.completed':
        if (!item) return;
        this.items.delete(itemId);
        this.took(performance.now() - item.at);
        this.transcript.update(item.segment, typeof message.transcript === 'string' ? message.transcript : item.segment.text, true);
        return;
      case 'conversation.item.input_audio_transcription.failed':
        if (!item) return;
        this.items.delete(itemId);
        this.warn({ code: objectOr(message.error).code }, 'transcription of an utterance failed; it has no words');
        this.transcript.update(item.segment, '', true);
        return;
      case 'error': {
        const error = objectOr(message.error);
        this.warn({ code: error.code, type: error.type }, 'the realtime transcription refused an event');
        // A refused commit (too little audio) never gets its item: its piece has no words.
        const index = this.committing.findIndex((c) => c.eventId === error.event_id);
        if (index >= 0) this.transcript.update(this.committing.splice(index, 1)[0]!.segment, '', true);
        return;
      }
      default:
    }
  }
}

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
      const pieces = new CommittedPieces(
        transcript,
        (fields, message) => logger.warn({ callId: options.callId, provider: 'openai', ...fields }, message),
        (ms) => probe?.('stt', 'openai', ms),
      );
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
        send({ type: 'input_audio_buffer.commit', event_id: pieces.commit() });
        bufferedMs = 0;
        bufferedSpeech = false;
      };
      const fail = (error: Error) => {
        const wasClosed = closed;
        closed = true;
        socket.terminate();
        if (!wasClosed) options.onError(error);
      };

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
          if (message) pieces.handle(message);
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
