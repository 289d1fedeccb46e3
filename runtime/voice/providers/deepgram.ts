import WebSocket from 'ws';
import { samplesToBytes, SAMPLE_RATE } from '../audio.js';
import type { FirstByteProbe, SttOptions, SttProvider, SttStream } from './types.js';
import { objectOr, parseObject, vendorMessage } from './wire.js';

/**
 * Deepgram live transcription: WebSocket `/v1/listen`, linear16 16 kHz, interim results,
 * `Finalize` at the end of a turn, `language=multi` when secondary languages are set.
 */

/** Deepgram closes a stream that gets no audio for 10 s; an idle one (ringing, a held call) says it is alive. */
const DEEPGRAM_KEEPALIVE_MS = 5_000;
/** The model calls and voice messages are transcribed with. */
export const DEEPGRAM_MODEL = 'nova-3';

/** Deepgram's `language`: the one expected, or `multi` (code-switching) when the assistant speaks several. */
export const deepgramLanguage = (languages: readonly string[]): string => (languages.length > 1 ? 'multi' : languages[0] ?? 'en');

export function createDeepgramStt(settings: { apiKey: string; url: string; model?: string; keepAliveMs?: number }, probe?: FirstByteProbe): SttProvider {
  return {
    name: 'deepgram',
    open(options: SttOptions): SttStream {
      const query = new URLSearchParams({
        model: settings.model ?? DEEPGRAM_MODEL,
        encoding: 'linear16',
        sample_rate: String(SAMPLE_RATE),
        channels: '1',
        interim_results: 'true',
        punctuate: 'true',
        smart_format: 'true',
        endpointing: 'false',
        language: deepgramLanguage(options.languages),
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
