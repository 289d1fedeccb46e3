import { bytesToSamples, samplesToBytes } from '../audio.js';
import type { MediaCodec, MediaFormat } from './types.js';

/**
 * Browser calls at `GET /ws/web-call?call_id=..&token=..`. Binary frames both ways are PCM16
 * mono 16 kHz (20 ms = 640 bytes). JSON control frames from the browser: `{type: "mark", name}`
 * (echo of a server mark once the audio before it has played), `{type: "dtmf", digit}`,
 * `{type: "hangup"}`. From the server: `{type: "mark", name}`, `{type: "clear"}` (drop buffered
 * audio: the caller interrupted), `{type: "error", error}` for a frame it cannot read.
 */

const reply = (error: string) => ({ type: 'reply', message: JSON.stringify({ type: 'error', error }) }) as const;

function browserCodec(): MediaCodec {
  return {
    decode(message, isBinary) {
      if (isBinary) return { type: 'audio', samples: bytesToSamples(new Uint8Array(message.slice(0))) };
      let frame: { type?: unknown; name?: unknown; digit?: unknown };
      try {
        frame = JSON.parse(Buffer.from(message).toString('utf8')) as typeof frame;
      } catch {
        return reply('The frame is not valid JSON.');
      }
      if (frame === null || typeof frame !== 'object') frame = {};
      if (frame.type === 'mark' && typeof frame.name === 'string') return { type: 'mark', name: frame.name };
      if (frame.type === 'dtmf' && typeof frame.digit === 'string') return { type: 'dtmf', digit: frame.digit };
      if (frame.type === 'hangup') return { type: 'stop' };
      return reply('Unknown frame; send audio as binary PCM16 16 kHz, or {"type": "mark" | "dtmf" | "hangup"}.');
    },
    audio: (frame) => ({ data: samplesToBytes(frame), binary: true }),
    mark: (name) => ({ data: JSON.stringify({ type: 'mark', name }), binary: false }),
    clear: () => ({ data: JSON.stringify({ type: 'clear' }), binary: false }),
  };
}

/** A browser's socket closing normally (the tab closed, the page hung up) is the caller hanging up. */
export const browserFormat: MediaFormat = { name: 'web_call', path: '/ws/web-call', claim: 'query', codec: browserCodec, hangUpOnClose: (code) => code === 1000 || code === 1001 };
