import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import WebSocket from 'ws';
import { mediaPayload, mediaPrefix, twilioFormat } from '../../voice/serializers/twilio.js';
import { Downsampler, FRAME_SAMPLES, SAMPLE_RATE, Upsampler, mulawEncode } from '../../voice/audio.js';
import type { Logger } from '../../logger.js';
import type { Carrier, CarrierStatus } from './types.js';

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

/** What the loopback carrier hands to the local phone that answers. */
export interface LoopbackDial {
  readonly callId: number;
  readonly carrierCallId: string;
  readonly to: string;
  readonly from: string;
  readonly streamUrl: string;
  readonly token: string;
}

/**
 * The loopback network's side of one call, for the callee that `dial` plays: what a real carrier
 * would report about it, and the platform's hanging it up before it connected.
 */
export interface LoopbackLine {
  /**
   * The carrier reports `status`, as a real carrier's status callback would: it reaches the call
   * through the voice service (`Carriers.reportStatusesTo`), after the answer to the request that
   * placed it, on any process holding the call.
   */
  report(status: CarrierStatus): void;
  /** `stop` runs when the platform hangs the call up at the carrier (at most once); the returned function unregisters it. */
  onHangUp(stop: () => void): () => void;
}

/** A status the loopback carrier reports, under the carrier name its call records (the stood-in carrier's). */
export interface LoopbackStatus {
  readonly carrier: string;
  readonly callId: number;
  readonly carrierCallId: string;
  readonly status: CarrierStatus;
}

export type LoopbackStatusSink = (report: LoopbackStatus) => Promise<void>;

/** How many of its latest transfers and hang-ups the loopback carrier keeps (a long-running server places calls without end). */
const KEPT_ACTS = 1_000;

function keepLast<T>(list: T[], item: T): void {
  list.push(item);
  if (list.length > KEPT_ACTS) list.splice(0, list.length - KEPT_ACTS);
}

export interface LoopbackCarrier extends Carrier {
  /** Its latest transfers and hang-ups (at most 1,000 of each), for tests to read. */
  readonly transfers: Array<{ carrierCallId: string; number: string }>;
  readonly hangUps: Array<{ carrierCallId: string; state: 'ringing' | 'connected' }>;
  /** Where the statuses its callees report go (the voice service, which exists after the carrier); until then they are dropped. */
  reportStatusesTo(sink: LoopbackStatusSink): void;
}

/**
 * @param dial answers the call, or not: the callee, given the call and its line. It may connect a
 *   phone client to `streamUrl` that sends `start` with the token, and report statuses on the line.
 *   The default (for `npm start` without a carrier) is the simulated callee by number (`loopbackCallee.ts`).
 */
export function createLoopbackCarrier(dial: (call: LoopbackDial, line: LoopbackLine) => void, logger?: Logger): LoopbackCarrier {
  const transfers: Array<{ carrierCallId: string; number: string }> = [];
  const hangUps: Array<{ carrierCallId: string; state: 'ringing' | 'connected' }> = [];
  /** The callees waiting to hear of a hang-up (a phone still ringing), by carrier call id. */
  const waiting = new Map<string, () => void>();
  let sink: LoopbackStatusSink | undefined;
  const deliver = (report: LoopbackStatus) => {
    // Deferred past the answer to `place` (and what the platform does with it), as a callback over HTTP comes after it.
    setImmediate(() => {
      if (!sink) return;
      sink(report).catch((error: unknown) => logger?.warn({ err: error, callId: report.callId, status: report.status }, 'loopback status could not be reported'));
    });
  };
  return {
    name: 'loopback',
    // The phone it answers with speaks Twilio's media streams.
    format: twilioFormat,
    transfers,
    hangUps,
    reportStatusesTo(to) {
      sink = to;
    },
    async place(request) {
      const carrierCallId = `LB${randomBytes(16).toString('hex')}`;
      const line: LoopbackLine = {
        report: (status) => deliver({ carrier: request.carrier, callId: request.callId, carrierCallId, status }),
        onHangUp(stop) {
          waiting.set(carrierCallId, stop);
          return () => waiting.delete(carrierCallId);
        },
      };
      queueMicrotask(() => {
        try {
          dial({ callId: request.callId, carrierCallId, to: request.to, from: request.from, streamUrl: request.streamUrl, token: request.token }, line);
        } catch (error) {
          logger?.warn({ err: error, callId: request.callId }, 'loopback phone failed to answer');
        }
      });
      return { carrierCallId };
    },
    async transfer(carrierCallId, number) {
      keepLast(transfers, { carrierCallId, number });
    },
    async hangUp(carrierCallId, state) {
      keepLast(hangUps, { carrierCallId, state });
      const stop = waiting.get(carrierCallId);
      waiting.delete(carrierCallId);
      stop?.();
    },
  };
}
