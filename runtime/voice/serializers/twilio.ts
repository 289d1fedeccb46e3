import { Downsampler, FRAME_SAMPLES, Upsampler } from '../audio.js';
import type { MediaCodec, MediaEvent, MediaFormat } from './types.js';

/**
 * Twilio's media-stream wire format (`twilioFormat`), and the message handling it shares with the
 * simulated phone: the base64 payload of a `media` message found without parsing the JSON (50
 * such messages a second per call), and a `media` message written without building an object.
 */

const MEDIA_MARKER = Buffer.from('"event":"media"');
const PAYLOAD_MARKER = Buffer.from('"payload":"');
const OUTBOUND_TRACK = Buffer.from('"track":"outbound"');

const BASE64_VALUE = new Int8Array(256).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].entries()) BASE64_VALUE[c.charCodeAt(0)] = i;
let scratch = new Uint8Array(1024);

/**
 * The decoded payload of a `media` message; undefined for any other message or an outbound-track
 * echo. The bytes are decoded straight from the message into a shared scratch buffer, valid until
 * the next call (the socket converts them at once); unusual base64 (escapes, whitespace) takes
 * Node's decoder instead.
 */
export function mediaPayload(raw: Buffer): Uint8Array | undefined {
  if (raw.indexOf(MEDIA_MARKER) === -1 || raw.indexOf(OUTBOUND_TRACK) !== -1) return undefined;
  const start = raw.indexOf(PAYLOAD_MARKER);
  if (start === -1) return undefined;
  const from = start + PAYLOAD_MARKER.length;
  const end = raw.indexOf(0x22, from);
  if (end === -1) return undefined;
  return decodeBase64(raw, from, end) ?? Buffer.from(raw.toString('latin1', from, end), 'base64');
}

function decodeBase64(raw: Uint8Array, from: number, to: number): Uint8Array | undefined {
  let end = to;
  while (end > from && raw[end - 1] === 0x3d) end--;
  const chars = end - from;
  if (chars % 4 === 1 || to - end > 2) return undefined;
  const length = (chars * 3) >> 2;
  if (scratch.length < length) scratch = new Uint8Array(length * 2);
  let o = 0;
  let i = from;
  for (; i + 4 <= end; i += 4) {
    const a = BASE64_VALUE[raw[i]!]!;
    const b = BASE64_VALUE[raw[i + 1]!]!;
    const c = BASE64_VALUE[raw[i + 2]!]!;
    const d = BASE64_VALUE[raw[i + 3]!]!;
    if ((a | b | c | d) < 0) return undefined;
    const n = (a << 18) | (b << 12) | (c << 6) | d;
    scratch[o++] = n >> 16;
    scratch[o++] = (n >> 8) & 0xff;
    scratch[o++] = n & 0xff;
  }
  const rest = end - i;
  if (rest > 0) {
    const a = BASE64_VALUE[raw[i]!]!;
    const b = BASE64_VALUE[raw[i + 1]!]!;
    const c = rest === 3 ? BASE64_VALUE[raw[i + 2]!]! : 0;
    if ((a | b | c) < 0) return undefined;
    const n = (a << 18) | (b << 12) | (c << 6);
    scratch[o++] = n >> 16;
    if (rest === 3) scratch[o++] = (n >> 8) & 0xff;
  }
  return scratch.subarray(0, o);
}

/** The leading part of every `media` message of a stream; append the base64 payload and `"}}`. */
export function mediaPrefix(streamSid: string): string {
  return `{"event":"media","streamSid":${JSON.stringify(streamSid)},"media":{"payload":"`;
}

const BASE64 = Uint8Array.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/', (c) => c.charCodeAt(0));
const PAD = 0x3d;

/** Writes `length` bytes of `source` as base64 into `target` at `offset`; returns the end offset. */
export function base64Into(source: Uint8Array, length: number, target: Uint8Array, offset: number): number {
  let o = offset;
  let i = 0;
  for (; i + 2 < length; i += 3) {
    const n = (source[i]! << 16) | (source[i + 1]! << 8) | source[i + 2]!;
    target[o++] = BASE64[n >> 18]!;
    target[o++] = BASE64[(n >> 12) & 63]!;
    target[o++] = BASE64[(n >> 6) & 63]!;
    target[o++] = BASE64[n & 63]!;
  }
  if (i < length) {
    const n = (source[i]! << 16) | (i + 1 < length ? source[i + 1]! << 8 : 0);
    target[o++] = BASE64[n >> 18]!;
    target[o++] = BASE64[(n >> 12) & 63]!;
    target[o++] = i + 1 < length ? BASE64[(n >> 6) & 63]! : PAD;
    target[o++] = PAD;
  }
  return o;
}

const SUFFIX = Buffer.from('"}}');

/**
 * The outbound `media` messages of one stream: a 16 kHz frame is downsampled, mu-law encoded and
 * base64 written straight into one message buffer, reused for every frame (the socket copies what
 * it sends), so the 50 messages a second of a call allocate nothing. Any JSON format whose media
 * message ends in `"payload":"<base64>"}}` writes with it (Twilio's, Telnyx's).
 */
export class MediaMessageWriter {
  private readonly downsampler = new Downsampler();
  private readonly mulaw: Uint8Array;
  private readonly message: Buffer;
  private readonly payloadAt: number;

  /** @param leading the message up to the payload's opening quote, e.g. `mediaPrefix(streamSid)`. */
  constructor(leading: string, maxSamples = FRAME_SAMPLES) {
    const prefix = Buffer.from(leading);
    this.mulaw = new Uint8Array(maxSamples >> 1);
    this.message = Buffer.alloc(prefix.length + Math.ceil(this.mulaw.length / 3) * 4 + SUFFIX.length);
    prefix.copy(this.message);
    this.payloadAt = prefix.length;
  }

  /** The message for `frame` (at most `maxSamples`); valid until the next call. */
  frame(frame: Int16Array): Uint8Array {
    const bytes = this.downsampler.toMulaw(frame, this.mulaw);
    const end = base64Into(this.mulaw, bytes, this.message, this.payloadAt);
    SUFFIX.copy(this.message, end);
    return this.message.subarray(0, end + SUFFIX.length);
  }
}

/** The fields of a JSON media-stream message that Twilio's and Telnyx's formats share. */
export interface MulawJsonMessage {
  event?: string;
  media?: { payload?: string; track?: string };
  mark?: { name?: string };
  dtmf?: { digit?: string };
}

/**
 * One message of a JSON media stream carrying 8 kHz mu-law in `media.payload` (Twilio's, Telnyx's):
 * the inbound track's audio (the 50 `media` messages a second decoded without parsing the JSON),
 * echoed marks, digits and `stop`. Any other event goes to `other`, parsed; undefined for what
 * means nothing to the call. Anyone can open the socket: whatever is not JSON, not an object or
 * lacks the expected fields is ignored.
 */
export function decodeMulawJson<M extends MulawJsonMessage>(
  message: ArrayBuffer,
  isBinary: boolean,
  upsampler: Upsampler,
  other: (parsed: M) => MediaEvent | undefined = () => undefined,
): MediaEvent | undefined {
  if (isBinary) return undefined;
  const bytes = Buffer.from(message);
  const payload = mediaPayload(bytes);
  if (payload) return { type: 'audio', samples: upsampler.processMulaw(payload) };
  let parsed: M;
  try {
    parsed = JSON.parse(bytes.toString('utf8')) as M;
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object') return undefined;
  switch (parsed.event) {
    case 'media':
      if (typeof parsed.media?.payload !== 'string' || (parsed.media.track ?? 'inbound') !== 'inbound') return undefined;
      return { type: 'audio', samples: upsampler.processMulaw(Buffer.from(parsed.media.payload, 'base64')) };
    case 'mark':
      return typeof parsed.mark?.name === 'string' ? { type: 'mark', name: parsed.mark.name } : undefined;
    case 'dtmf':
      return typeof parsed.dtmf?.digit === 'string' ? { type: 'dtmf', digit: parsed.dtmf.digit } : undefined;
    case 'stop':
      return { type: 'stop' };
    default:
      return other(parsed);
  }
}

interface TwilioMessage extends MulawJsonMessage {
  streamSid?: string;
  start?: { streamSid?: string; callSid?: string; customParameters?: Record<string, string> };
}

/** One Twilio media stream: JSON messages, 8 kHz mu-law in base64 both ways. */
function twilioCodec(): MediaCodec {
  const upsampler = new Upsampler();
  let streamSid = '';
  let writer: MediaMessageWriter | undefined;
  function start(parsed: TwilioMessage): MediaEvent | undefined {
    if (parsed.event !== 'start') return undefined;
    const params = (typeof parsed.start?.customParameters === 'object' && parsed.start.customParameters) || {};
    const sid = parsed.start?.streamSid ?? parsed.streamSid;
    streamSid = typeof sid === 'string' ? sid : '';
    writer = new MediaMessageWriter(mediaPrefix(streamSid));
    return { type: 'start', callId: Number(params.call_id), token: String(params.token ?? ''), streamId: streamSid };
  }
  return {
    decode(message, isBinary) {
      const event = decodeMulawJson(message, isBinary, upsampler, start);
      // Audio before `start` names no call yet.
      return event?.type === 'audio' && !writer ? undefined : event;
    },
    audio: (frame) => ({ data: (writer ??= new MediaMessageWriter(mediaPrefix(streamSid))).frame(frame), binary: false }),
    mark: (name) => ({ data: JSON.stringify({ event: 'mark', streamSid, mark: { name } }), binary: false }),
    clear: () => ({ data: JSON.stringify({ event: 'clear', streamSid }), binary: false }),
  };
}

/** Twilio Media Streams (bidirectional), `<Connect><Stream>` with the call's id and token as `<Parameter>`s. */
export const twilioFormat: MediaFormat = { name: 'twilio', path: '/ws/telephony/twilio', claim: 'start', codec: twilioCodec };
