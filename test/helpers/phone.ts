import { EventEmitter } from 'node:events';
import WebSocket from 'ws';
import type { ManualClock } from '../../runtime/clock.js';
import { Downsampler, FRAME_SAMPLES, Upsampler, bytesToSamples, levelDb, mulawEncode, samplesToBytes } from '../../runtime/voice/audio.js';
import { MediaStreamPhone, callerSpeechFrame, pingPong, type PhoneEvents } from '../../runtime/calls/carriers/loopback.js';

/** What the simulated caller needs of a connection: the Twilio media stream or a web call socket. */
export interface PhoneLine extends EventEmitter<PhoneEvents> {
  readonly socket: WebSocket;
  readonly closed: boolean;
  speak(frame?: Int16Array): void;
  dtmf(digit: string): void;
  hangUp(): void;
  sync(): Promise<void>;
}

/** Resolves once `socket` is open; rejects when the upgrade is refused (with its status) or fails. */
export function opened(socket: WebSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    socket.once('error', reject);
  });
}

/**
 * A phone on a carrier's side of a JSON media stream carrying 8 kHz mu-law (Telnyx's, Plivo's):
 * the socket, ordered sends, the audio codec both ways and ping-pong sync; each carrier's phone
 * reads the messages in `receive` and writes its own `start`, `media`, `dtmf` and hang-up. Binary
 * messages, and those `receive` does not expect, are kept in `unexpected`.
 */
export abstract class JsonStreamLine extends EventEmitter<PhoneEvents> implements PhoneLine {
  readonly socket: WebSocket;
  /** Echo marks back (as the carrier does once the audio before them has played). */
  echoMarks = true;
  closed = false;
  readonly unexpected: unknown[] = [];
  private readonly down = new Downsampler();
  private readonly up = new Upsampler();

  constructor(url: string) {
    super();
    this.socket = new WebSocket(url);
    this.socket.on('message', (data, isBinary) => {
      if (isBinary) this.unexpected.push(data);
      else this.receive(JSON.parse(data.toString()) as Record<string, unknown>);
    });
    this.socket.on('close', (code) => {
      this.closed = true;
      this.emit('close', code);
    });
    this.socket.on('error', () => {});
  }

  /** One message from the platform, parsed. */
  protected abstract receive(message: Record<string, unknown>): void;

  /** The agent's audio (base64 of 8 kHz mu-law) heard as 16 kHz PCM16. */
  protected hear(payload: string): void {
    this.emit('audio', this.up.processMulaw(Buffer.from(payload, 'base64')));
  }

  /** One 20 ms frame of the caller (16 kHz PCM16) as base64 of 8 kHz mu-law. */
  protected encode(frame: Int16Array): string {
    return mulawEncode(this.down.process(frame)).toString('base64');
  }

  protected send(message: unknown): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  abstract speak(frame?: Int16Array): void;
  abstract dtmf(digit: string): void;
  abstract hangUp(): void;

  sync(): Promise<void> {
    return pingPong(this.socket);
  }
}

/** The browser side of `/ws/web-call`: binary PCM16 16 kHz frames, JSON control frames. */
export class WebCallLine extends EventEmitter<PhoneEvents> implements PhoneLine {
  readonly socket: WebSocket;
  closed = false;
  /** Text frames other than marks and clears. */
  readonly control: unknown[] = [];

  constructor(url: string) {
    super();
    this.socket = new WebSocket(url);
    this.socket.on('message', (data, isBinary) => {
      if (isBinary) {
        this.emit('audio', bytesToSamples(new Uint8Array(data as Buffer)).slice());
        return;
      }
      const frame = JSON.parse(data.toString()) as { type: string; name?: string };
      if (frame.type === 'mark') {
        this.socket.send(JSON.stringify({ type: 'mark', name: frame.name }));
        this.emit('mark', frame.name!);
      } else if (frame.type === 'clear') this.emit('clear');
      else this.control.push(frame);
    });
    this.socket.on('close', (code) => {
      this.closed = true;
      this.emit('close', code);
    });
    this.socket.on('error', () => {});
  }

  open(): Promise<void> {
    return opened(this.socket);
  }

  speak(frame: Int16Array = new Int16Array(FRAME_SAMPLES)): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(samplesToBytes(frame));
  }

  dtmf(digit: string): void {
    this.socket.send(JSON.stringify({ type: 'dtmf', digit }));
  }

  hangUp(): void {
    this.socket.send(JSON.stringify({ type: 'hangup' }));
    this.socket.close(1000);
  }

  sync(): Promise<void> {
    return pingPong(this.socket);
  }
}

/**
 * A simulated caller on a scripted timeline. Every step sends one 20 ms frame, waits until the
 * server has handled it (WebSocket ping/pong), moves the platform's manual clock by 20 ms (the
 * server's ticker sends the agent's audio then), and waits again so the phone has received what
 * the server sent. Caller speech is a voiced tone with harmonics; silence is zeros.
 */

export interface Heard {
  /** Frames of audible agent audio received so far. */
  speechFrames: number;
  /** All media frames received. */
  frames: number;
  marks: string[];
  clears: number;
  /** When each clear arrived, in the phone's simulated milliseconds (`elapsed`). */
  clearsAt: number[];
}

/** Caller speech (see `callerSpeechFrame`). */
export const speechFrame = callerSpeechFrame;

export class SimulatedPhone {
  readonly heard: Heard = { speechFrames: 0, frames: 0, marks: [], clears: 0, clearsAt: [] };
  /** Simulated milliseconds since the phone connected. */
  elapsed = 0;
  private spoken = 0;
  /** Simulated time of the first audible agent frame after `markTime()`. */
  firstSpeechAt: number | undefined;
  /**
   * Whether the agent is still preparing an answer (set by the call helpers from the server's
   * session): `untilAgentDone` does not count quiet while it is, so a reply still travelling from a
   * fake vendor over real sockets is waited for however fast simulated time goes.
   */
  busy: () => boolean = () => false;

  constructor(readonly phone: PhoneLine, readonly clock: ManualClock) {
    phone.on('audio', (frame) => {
      this.heard.frames++;
      if (levelDb(frame) > -32) {
        this.heard.speechFrames++;
        this.firstSpeechAt ??= this.elapsed;
      }
    });
    phone.on('mark', (name) => this.heard.marks.push(name));
    phone.on('clear', () => {
      this.heard.clears++;
      this.heard.clearsAt.push(this.elapsed);
    });
  }

  static async dial(url: string, callSid: string, parameters: Record<string, string>, clock: ManualClock): Promise<SimulatedPhone> {
    const phone = new MediaStreamPhone(url, { callSid, customParameters: parameters });
    await phone.open();
    await phone.sync();
    return new SimulatedPhone(phone, clock);
  }

  /** A web call to `websocketUrl` (as `POST /web-calls` returned it). */
  static async webCall(websocketUrl: string, clock: ManualClock): Promise<SimulatedPhone> {
    const line = new WebCallLine(websocketUrl);
    await line.open();
    await line.sync();
    return new SimulatedPhone(line, clock);
  }

  /** The server ended the call (its close frame arrived) or the socket is gone. */
  get closed(): boolean {
    return this.phone.closed || this.phone.socket.readyState !== WebSocket.OPEN;
  }

  async step(frame?: Int16Array): Promise<void> {
    if (this.closed) {
      await new Promise((resolve) => setImmediate(resolve));
      return;
    }
    this.phone.speak(frame);
    await this.phone.sync();
    this.clock.advance(20);
    this.elapsed += 20;
    await this.phone.sync();
  }

  /** The caller speaks for `ms`. */
  async talk(ms: number): Promise<void> {
    for (let t = 0; t < ms && !this.closed; t += 20) await this.step(speechFrame(this.spoken++));
  }

  /** The caller speaks for `ms`; then the agent answers and finishes speaking. */
  async turn(ms = 800, maxMs = 8_000): Promise<void> {
    const before = this.heard.speechFrames;
    await this.talk(ms);
    await this.until(() => this.heard.speechFrames > before + 10, maxMs, 'the answer');
    await this.untilAgentDone();
  }

  async silence(ms: number): Promise<void> {
    for (let t = 0; t < ms && !this.closed; t += 20) await this.step();
  }

  /**
   * Stays silent until `condition` holds; fails after `maxMs` of simulated time.
   * @returns the simulated milliseconds it took.
   */
  async until(condition: () => boolean, maxMs = 20_000, what = 'condition'): Promise<number> {
    const start = this.elapsed;
    while (!condition()) {
      if (this.elapsed - start >= maxMs) throw new Error(`${what} not reached within ${maxMs} ms of simulated time`);
      if (this.closed) {
        if (condition()) break;
        throw new Error(`the call ended before ${what}`);
      }
      await this.step();
    }
    return this.elapsed - start;
  }

  /** Waits (in simulated time) until the agent has been silent for `quietMs` after speaking. */
  async untilAgentDone(quietMs = 400, maxMs = 30_000): Promise<void> {
    let last = this.heard.speechFrames;
    let quiet = 0;
    const start = this.elapsed;
    while (quiet < quietMs) {
      if (this.elapsed - start > maxMs) throw new Error('the agent did not stop speaking');
      if (this.closed) return;
      await this.step();
      if (this.heard.speechFrames === last && !this.busy()) quiet += 20;
      else {
        last = this.heard.speechFrames;
        quiet = 0;
      }
    }
  }
}
