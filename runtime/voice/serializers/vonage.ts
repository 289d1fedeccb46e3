import { allocSamples, samplesToBytes } from '../audio.js';
import type { MediaCodec, MediaEvent, MediaFormat } from './types.js';

/**
 * Vonage's Voice API WebSocket (`vonageFormat`): the NCCO `connect` action with a `websocket`
 * endpoint and `content-type: audio/l16;rate=16000`, the engine's own rate, so no resampler is in
 * the path either way.
 *
 * From Vonage: first a text message `{"event": "websocket:connected", "content-type": ...}` that
 * also carries the endpoint's `headers` (here the call's `call_id` and one-time `token`; at most
 * 512 bytes), then binary messages of 16-bit little-endian PCM (640 bytes = 20 ms), and text
 * events: `websocket:dtmf` (`digit`), `websocket:notify` (the `payload` of a `notify` sent
 * earlier, once the audio queued before it has played) and `websocket:cleared`.
 * To Vonage: binary messages of 640 bytes, `{"action": "notify", "payload": {...}}` (the mark) and
 * `{"action": "clear"}` (drop the audio Vonage has buffered: barge-in).
 * The call's end closes the socket normally (Vonage sends no stop message), so a normal close is
 * the caller hanging up; the platform ends the call by closing it (the NCCO then has nothing left).
 */

interface VonageMessage {
  event?: unknown;
  call_id?: unknown;
  token?: unknown;
  headers?: { call_id?: unknown; token?: unknown };
  digit?: unknown;
  dtmf?: { digit?: unknown };
  payload?: { name?: unknown };
}

const CLEAR = JSON.stringify({ action: 'clear' });

/** The text messages: the stream's claim, DTMF and mark echoes; undefined for anything else. */
function decodeText(message: ArrayBuffer): MediaEvent | undefined {
  let parsed: VonageMessage;
  try {
    parsed = JSON.parse(Buffer.from(message).toString('utf8')) as VonageMessage;
  } catch {
    return undefined;
  }
  // Anyone can open the socket: whatever is not an object with the expected fields is ignored.
  if (parsed === null || typeof parsed !== 'object') return undefined;
  switch (parsed.event) {
    case 'websocket:connected': {
      // The endpoint's headers arrive as top-level fields of this message.
      const headers = parsed.call_id === undefined && typeof parsed.headers === 'object' && parsed.headers !== null ? parsed.headers : parsed;
      return { type: 'start', callId: Number(headers.call_id), token: String(headers.token ?? ''), streamId: '' };
    }
    case 'websocket:dtmf': {
      const digit = parsed.digit ?? parsed.dtmf?.digit;
      return typeof digit === 'string' ? { type: 'dtmf', digit } : undefined;
    }
    case 'websocket:notify':
      return typeof parsed.payload?.name === 'string' ? { type: 'mark', name: parsed.payload.name } : undefined;
    default:
      return undefined;
  }
}

function vonageCodec(): MediaCodec {
  return {
    decode(message, isBinary) {
      if (!isBinary) return decodeText(message);
      // Copied out of the socket's buffer (valid during the callback only); an odd last byte is dropped.
      const samples = allocSamples(message.byteLength >> 1);
      samples.set(new Int16Array(message, 0, samples.length));
      return { type: 'audio', samples };
    },
    // A frame is 20 ms: exactly the 640 bytes Vonage plays per message.
    audio: (frame) => ({ data: samplesToBytes(frame), binary: true }),
    mark: (name) => ({ data: JSON.stringify({ action: 'notify', payload: { name } }), binary: false }),
    clear: () => ({ data: CLEAR, binary: false }),
  };
}

/** Vonage Voice API WebSockets, the call's id and token in the endpoint's headers (the `websocket:connected` message). */
export const vonageFormat: MediaFormat = {
  name: 'vonage',
  path: '/ws/telephony/vonage',
  claim: 'start',
  codec: vonageCodec,
  // Vonage closes the socket normally when the call ends; anything else is a lost connection.
  hangUpOnClose: (code) => code === 1000 || code === 1001,
};
