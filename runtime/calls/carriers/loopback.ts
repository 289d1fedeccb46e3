import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import WebSocket from 'ws';
import { mediaPayload, mediaPrefix, twilioFormat } from '../../voice/serializers/twilio.js';
import { Downsampler, FRAME_MS, FRAME_SAMPLES, SAMPLE_RATE, Upsampler, mulawEncode } from '../../voice/audio.js';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { Carrier } from './types.js';

/**
 * A phone on the client side of the Twilio media-stream protocol: it sends `connected`, `start`
 * (with the stream parameters), `media` frames of 8 kHz mu-law, `mark` echoes, `dtmf` and `stop`,
 * and receives the agent's `media`, `mark` and `clear`. The loopback carrier answers calls with
 * it, benchmarks run hundreds of them, and tests drive it frame by frame.
 */

export interface PhoneEvents {
  /** The agent's audio, as 16 kHz PCM16 (converted back from mu-law). */
  audio: [Int16Array];
  mark: [string];
  clear: [];
  close: [number];
  /** The agent's audio as received (8 kHz mu-law), when the phone does not decode it; valid during the event only. */
  payload: [Uint8Array];
}

let sequence = 0;

export class MediaStreamPhone extends EventEmitter<PhoneEvents> {
  readonly socket: WebSocket;
  readonly streamSid = `MZ${(++sequence).toString(16).padStart(32, '0')}`;
  private readonly down = new Downsampler();
  private readonly up = new Upsampler();
  private chunk = 0;
  private timestamp = 0;
  private seq = 0;
  /** Echo marks back (as Twilio does once the audio before them has played). */
  echoMarks = true;
  closed = false;

  private readonly prefix: string;

  /** @param options.decode emit `audio` (16 kHz PCM16); false emits `payload` (mu-law) and saves the work. */
  constructor(url: string, private readonly start: { callSid: string; customParameters: Record<string, string> }, options: { decode?: boolean } = {}) {
    super();
    const decode = options.decode ?? true;
    this.prefix = mediaPrefix(this.streamSid);
    this.socket = new WebSocket(url);
    this.socket.on('message', (data, isBinary) => {
      if (isBinary) return;
      const payload = mediaPayload(data as Buffer);
      if (payload) {
        if (decode) this.emit('audio', this.up.processMulaw(payload));
        else this.emit('payload', payload);
        return;
      }
      let message: { event?: string; media?: { payload?: string }; mark?: { name?: string } } | null;
      try {
        message = JSON.parse(data.toString());
      } catch {
        return;
      }
      if (message === null || typeof message !== 'object') return;
      if (message.event === 'media' && message.media?.payload) this.emit('audio', this.up.processMulaw(Buffer.from(message.media.payload, 'base64')));
      else if (message.event === 'mark' && message.mark?.name) {
        if (this.echoMarks) this.send({ event: 'mark', streamSid: this.streamSid, mark: { name: message.mark.name } });
        this.emit('mark', message.mark.name);
      } else if (message.event === 'clear') this.emit('clear');
    });
    this.socket.on('close', (code) => {
      this.closed = true;
      this.emit('close', code);
    });
    this.socket.on('error', () => {});
  }

  /** Opens the socket and sends `connected` and `start`. */
  async open(): Promise<void> {
    if (this.socket.readyState !== WebSocket.OPEN) {
      await new Promise<void>((resolve, reject) => {
        this.socket.once('open', () => resolve());
        this.socket.once('error', reject);
        this.socket.once('close', () => reject(new Error('closed before opening')));
      });
    }
    this.send({ event: 'connected', protocol: 'Call', version: '1.0.0' });
    this.send({
      event: 'start',
      sequenceNumber: String(++this.seq),
      start: {
        accountSid: 'AC00000000000000000000000000000000',
        streamSid: this.streamSid,
        callSid: this.start.callSid,
        tracks: ['inbound'],
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        customParameters: this.start.customParameters,
      },
      streamSid: this.streamSid,
    });
  }

  send(message: unknown): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  /** One 20 ms frame of the caller's voice (16 kHz PCM16, 320 samples); silence when omitted. */
  speak(frame: Int16Array = new Int16Array(FRAME_SAMPLES)): void {
    const payload = mulawEncode(this.down.process(frame)).toString('base64');
    this.send({ event: 'media', sequenceNumber: String(++this.seq), media: { track: 'inbound', chunk: String(++this.chunk), timestamp: String(this.timestamp), payload }, streamSid: this.streamSid });
    this.timestamp += 20;
  }

  /** One 20 ms frame already encoded (base64 of 160 mu-law bytes), for callers that repeat the same audio. */
  speakEncoded(payload: string): void {
    if (this.socket.readyState !== WebSocket.OPEN) return;
    this.socket.send(`${this.prefix}${payload}"}}`);
    this.timestamp += 20;
  }

  dtmf(digit: string): void {
    this.send({ event: 'dtmf', streamSid: this.streamSid, sequenceNumber: String(++this.seq), dtmf: { track: 'inbound_track', digit } });
  }

  /** The caller hangs up. */
  hangUp(): void {
    this.send({ event: 'stop', sequenceNumber: String(++this.seq), streamSid: this.streamSid, stop: { accountSid: 'AC00000000000000000000000000000000', callSid: this.start.callSid } });
    this.socket.close(1000);
  }

  /** Resolves after the server has handled everything sent before it (WebSocket ping/pong). */
  sync(): Promise<void> {
    return pingPong(this.socket);
  }
}

/**
 * Resolves once the peer answered a ping: everything sent before it has been handled there, and
 * everything it sent before the pong has arrived here (a socket keeps its order).
 */
export function pingPong(socket: WebSocket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.readyState !== WebSocket.OPEN) return resolve();
    const done = () => {
      socket.off('pong', done);
      socket.off('close', done);
      resolve();
    };
    socket.on('pong', done);
    socket.on('close', done);
    socket.ping();
  });
}

/**
 * A simulated caller's speech, frame `index` of it: a voiced sound about -20 dBFS with a gliding
 * pitch, a syllable rhythm and a 40 ms pause every 400 ms, so it is not stationary (a noise
 * suppressor keeps it, as it keeps real speech). Benchmarks and tests speak with it.
 */
export function callerSpeechFrame(index: number): Int16Array {
  const frame = new Int16Array(FRAME_SAMPLES);
  if (index % 20 >= 18) return frame;
  for (let i = 0; i < FRAME_SAMPLES; i++) {
    const t = (index * FRAME_SAMPLES + i) / SAMPLE_RATE;
    const phase = 2 * Math.PI * (170 * t - (40 / (2 * Math.PI * 0.7)) * Math.cos(2 * Math.PI * 0.7 * t));
    const envelope = 0.45 + 0.55 * Math.abs(Math.sin(Math.PI * 4 * t));
    frame[i] = Math.round((Math.sin(phase) + 0.5 * Math.sin(2 * phase) + 0.25 * Math.sin(3 * phase)) * 4_500 * envelope);
  }
  return frame;
}

/**
 * The default loopback phone: answers, stays silent (a frame every 20 ms by `clock`, the calls'
 * clock) and listens until the call ends.
 */
export function silentPhone(clock: Clock): (call: { carrierCallId: string; streamUrl: string; token: string; callId: number }) => void {
  return (call) => {
    const phone = new MediaStreamPhone(call.streamUrl, { callSid: call.carrierCallId, customParameters: { call_id: String(call.callId), token: call.token } });
    let timer: unknown;
    let closed = false;
    let next = 0;
    // Paced from a schedule, not from each frame's send, so frames do not drift behind the clock.
    const nextFrame = () => {
      next += FRAME_MS;
      timer = clock.setTimeout(() => {
        phone.speak();
        nextFrame();
      }, Math.max(0, next - clock.now()));
    };
    phone.open().then(
      () => {
        if (closed) return;
        next = clock.now();
        nextFrame();
      },
      () => {},
    );
    phone.on('close', () => {
      closed = true;
      clock.clearTimeout(timer);
    });
  };
}

/** What the loopback carrier hands to the local phone that answers. */
export interface LoopbackDial {
  readonly callId: number;
  readonly carrierCallId: string;
  readonly to: string;
  readonly from: string;
  readonly streamUrl: string;
  readonly token: string;
}

export interface LoopbackCarrier extends Carrier {
  readonly transfers: Array<{ carrierCallId: string; number: string }>;
  readonly hangUps: Array<{ carrierCallId: string; state: 'ringing' | 'connected' }>;
}

/**
 * @param dial answers the call: a phone client that connects to `streamUrl` and sends `start`
 *   with the token. The default (for `npm start` without a carrier) is a silent phone.
 */
export function createLoopbackCarrier(dial: (call: LoopbackDial) => void, logger?: Logger): LoopbackCarrier {
  const transfers: Array<{ carrierCallId: string; number: string }> = [];
  const hangUps: Array<{ carrierCallId: string; state: 'ringing' | 'connected' }> = [];
  return {
    name: 'loopback',
    // The phone it answers with speaks Twilio's media streams.
    format: twilioFormat,
    transfers,
    hangUps,
    async place(request) {
      const carrierCallId = `LB${randomBytes(16).toString('hex')}`;
      queueMicrotask(() => {
        try {
          dial({ callId: request.callId, carrierCallId, to: request.to, from: request.from, streamUrl: request.streamUrl, token: request.token });
        } catch (error) {
          logger?.warn({ err: error, callId: request.callId }, 'loopback phone failed to answer');
        }
      });
      return { carrierCallId };
    },
    async transfer(carrierCallId, number) {
      transfers.push({ carrierCallId, number });
    },
    async hangUp(carrierCallId, state) {
      hangUps.push({ carrierCallId, state });
    },
  };
}
