import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { CallRate } from '../prices.js';
import { FRAME_MS } from '../voice/audio.js';
import { CONNECT_TIMEOUT_MS } from '../voice/machine.js';
import type { CallSession } from '../voice/session.js';
import type { CallMode, CallTransport } from '../voice/spec.js';
import type { Carrier } from './carriers/types.js';
import type { CallEventLog } from './events.js';
import type { CallHeartbeat } from './repository.js';
import { isoTimestamp } from '../time.js';
import { WavRecorder } from './recording.js';

/**
 * The live calls of this process, by call id: the ticker that paces every joined call's outgoing audio, the watchdog that ends
 * calls whose media stopped, and the token bucket that keeps a caller's audio to real time.
 * Starting and ending calls is the lifecycle's (`lifecycle.ts`); this only holds them.
 */

/** A media stream must join its call within this, the time a call may stay unconnected. */
export const TOKEN_TTL_MS = CONNECT_TIMEOUT_MS;
/** A media stream silent this long (no frames at all) is a dropped connection. */
export const MEDIA_TIMEOUT_MS = 5_000;
/** The call ticker: every live call's due audio frames go out on it. */
const TICK_MS = 5;
/**
 * Caller audio a connection may deliver ahead of real time (frames bunched by the network, a
 * browser tab catching up). Beyond it frames are dropped: a client streaming faster than real time
 * cannot feed the speech vendors and the engine more audio than the call has lasted.
 */
const CALLER_AUDIO_BURST_MS = 2_000;

/** One live call as this process holds it. */
export interface LiveCall {
  readonly session: CallSession;
  readonly ownerId: number;
  readonly rate: CallRate;
  /** The meter has told the call to say goodbye: the balance is nearly spent. */
  cutOff: boolean;
  readonly record: boolean;
  readonly evaluate: boolean;
  recorder: WavRecorder | undefined;
  readonly mode: CallMode;
  /**
   * The hash of the stream token this process gave out for the call (empty for a call taken over
   * from another process), and when it expires: a stream that brings it here joins at once.
   */
  readonly tokenHash: Buffer;
  readonly tokenExpires: number;
  tokenUsed: boolean;
  carrierCallId: string | null;
  /** The carrier its number records (`twilio`, ...), whose webhooks and callbacks speak for the call; null for web calls. */
  readonly carrierName: string | null;
  /** The carrier serving it (the loopback one stands in for a carrier not configured). */
  readonly carrier: Carrier | undefined;
  /** The carrier reported the call over (busy, no answer, failed, canceled, completed): nothing to hang up there. */
  carrierEnded: boolean;
  /**
   * Another process accepted its media stream and holds it now: it leaves this process without an
   * end (its end, charge and webhook are the new holder's).
   */
  released: boolean;
  lastMediaAt: number;
  /** When the call's audio last went either way (caller frames in, agent frames out), by the clock. */
  heardAt: number | null;
  /** The transcript as the last heartbeat written holds it (what a sweep would keep if this process stopped). */
  beatTranscript: string;
  /** Its media socket has joined: the ticker paces it. */
  attached: boolean;
  /** What happened in the call so far, written in batches (heartbeats, the end). */
  readonly events: CallEventLog;
  /** Why the platform ended it, when it did (`hangup`: its owner asked; `shutdown`: the server stopped). */
  endReason: 'hangup' | 'shutdown' | null;
  /** Every status change saved so far, in order (a chain: each waits for the one before). */
  persisting: Promise<void>;
  /** Resolves once the call has ended and its end is saved. */
  readonly ended: Promise<void>;
  resolveEnded(): void;
}

/** What a new live call is made of; the rest of a `LiveCall` starts as nothing has happened yet. */
export type NewLiveCallEntry = Pick<LiveCall, 'session' | 'ownerId' | 'rate' | 'record' | 'evaluate' | 'mode' | 'tokenHash' | 'tokenExpires' | 'carrierCallId' | 'carrierName' | 'carrier' | 'lastMediaAt' | 'events'>;

/** A live call just started: not yet attached, answered, heard, cut off or ending. */
export function liveCallEntry(fields: NewLiveCallEntry): LiveCall {
  let resolveEnded!: () => void;
  const ended = new Promise<void>((resolve) => (resolveEnded = resolve));
  return {
    ...fields,
    cutOff: false,
    recorder: undefined,
    tokenUsed: false,
    carrierEnded: false,
    released: false,
    heardAt: null,
    beatTranscript: '',
    attached: false,
    endReason: null,
    persisting: Promise.resolve(),
    ended,
    resolveEnded,
  };
}

/** A new call's stream token: the token goes to the media socket, only its hash is kept. */
export interface StreamToken {
  readonly token: string;
  readonly hash: Buffer;
  readonly expires: number;
}

/** What a stream token is kept as: only its hash is stored. */
export const tokenDigest = (token: string) => createHash('sha256').update(token).digest();

export interface LiveCallsDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Where recordings are written (`DATA_DIR/recordings`). */
  readonly recordingsDir: string;
  /** Runs first on every tick, before the calls' frames go out (the meter). */
  onTick(now: number): void;
  /**
   * A call failed on its tick and could not even be ended: it was taken out of the registry and is
   * left to the orphan sweep. The lifecycle settles its waiters.
   */
  abandoned(call: LiveCall): void;
  /** A caller frame was dropped for arriving faster than real time. */
  droppedCallerFrame?(): void;
}

export class LiveCalls {
  private readonly calls = new Map<number, LiveCall>();
  private tickTimer: unknown;
  private nextTick = 0;
  private stopped = false;

  constructor(private readonly deps: LiveCallsDeps) {}

  get size(): number {
    return this.calls.size;
  }

  get(callId: number): LiveCall | undefined {
    return this.calls.get(callId);
  }

  values(): IterableIterator<LiveCall> {
    return this.calls.values();
  }

  entries(): IterableIterator<[number, LiveCall]> {
    return this.calls.entries();
  }

  ids(): IterableIterator<number> {
    return this.calls.keys();
  }

  /**
   * The calls as this process's heartbeat reports them: live ones, and `ending` ones (their end
   * still being saved). A transcript goes with a beat only when it changed since the last beat written.
   */
  beats(ending: Iterable<number>): CallHeartbeat[] {
    const beats: CallHeartbeat[] = [];
    for (const [id, call] of this.calls.entries()) {
      const transcript = call.session.transcriptText();
      beats.push({ id, heardAt: call.heardAt === null ? null : isoTimestamp(call.heardAt), transcript: transcript === call.beatTranscript ? null : transcript });
    }
    for (const id of ending) if (!this.calls.has(id)) beats.push({ id, heardAt: null, transcript: null });
    return beats;
  }

  /** The beats were written: the transcripts they carried are now the ones a sweep would keep. */
  beatsWritten(beats: readonly CallHeartbeat[]): void {
    for (const beat of beats) {
      const call = beat.transcript === null ? undefined : this.calls.get(beat.id);
      if (call) call.beatTranscript = beat.transcript!;
    }
  }

  has(callId: number): boolean {
    return this.calls.has(callId);
  }

  add(call: LiveCall): void {
    this.calls.set(call.session.spec.callId, call);
  }

  /** Takes the call out, unless another entry has taken its id meanwhile; true when it was there. */
  remove(call: LiveCall): boolean {
    const id = call.session.spec.callId;
    if (this.calls.get(id) !== call) return false;
    this.calls.delete(id);
    return true;
  }

  /** Live calls in `mode`, or all of them. */
  count(mode?: CallMode): number {
    if (!mode) return this.calls.size;
    let n = 0;
    for (const call of this.calls.values()) if (call.mode === mode) n++;
    return n;
  }

  /** A fresh stream token, valid for the time a call may stay unconnected. */
  issueToken(): StreamToken {
    const token = randomBytes(24).toString('base64url');
    return { token, hash: tokenDigest(token), expires: this.deps.clock.now() + TOKEN_TTL_MS };
  }

  /**
   * A media stream brings the token this process gave out for one of its calls: it joins at once
   * (one use, within the connect timeout). The claim is then recorded in PostgreSQL by the caller.
   */
  claimHere(callId: number, token: string): LiveCall | undefined {
    const call = this.calls.get(callId);
    if (!call || call.released || call.tokenUsed || call.tokenHash.length === 0 || this.deps.clock.now() > call.tokenExpires) return undefined;
    if (!timingSafeEqual(tokenDigest(token), call.tokenHash)) return undefined;
    call.tokenUsed = true;
    return call;
  }

  /**
   * Connects a claimed session to its media transport and starts pacing it; returns where the
   * socket hands the caller's 20 ms frames. A call no longer live has its transport closed.
   */
  attach(session: CallSession, transport: CallTransport): { audio(frame: Int16Array): void } {
    const { clock } = this.deps;
    const call = this.calls.get(session.spec.callId);
    if (!call) {
      transport.close();
      return { audio: () => {} };
    }
    call.attached = true;
    call.lastMediaAt = clock.now();
    if (call.record) call.recorder = new WavRecorder(join(this.deps.recordingsDir, `${session.spec.callId}.wav`));
    session.attach(transport);
    this.schedule();
    return { audio: this.callerAudio(call) };
  }

  /** Stops the ticker; calls are no longer paced. */
  stop(): void {
    this.stopped = true;
    if (this.tickTimer !== undefined) this.deps.clock.clearTimeout(this.tickTimer);
    this.tickTimer = undefined;
  }

  /** A token bucket of audio time in front of the session: refilled by the clock, FRAME_MS taken per frame. */
  private callerAudio(call: LiveCall): (frame: Int16Array) => void {
    const { clock, logger } = this.deps;
    const session = call.session;
    let allowance = CALLER_AUDIO_BURST_MS;
    let refilledAt = clock.now();
    let dropped = 0;
    return (frame) => {
      const now = clock.now();
      allowance = Math.min(CALLER_AUDIO_BURST_MS, allowance + (now - refilledAt));
      refilledAt = now;
      if (allowance < FRAME_MS) {
        if (dropped++ === 0) logger.warn({ callId: session.spec.callId }, 'caller audio arrives faster than real time; the excess is dropped');
        this.deps.droppedCallerFrame?.();
        return;
      }
      allowance -= FRAME_MS;
      call.lastMediaAt = now;
      call.heardAt = now;
      if (session.currentStatus === 'in-progress') call.recorder?.caller(frame);
      session.audio(frame);
    };
  }

  private schedule(): void {
    if (this.tickTimer !== undefined || this.stopped || this.calls.size === 0) return;
    const { clock } = this.deps;
    this.nextTick = Math.max(this.nextTick + TICK_MS, clock.now() + 1);
    this.tickTimer = clock.setTimeout(() => this.tick(), Math.max(0, this.nextTick - clock.now()));
  }

  private tick(): void {
    this.tickTimer = undefined;
    const now = this.deps.clock.now();
    // The meter's failure is logged, not thrown: out of this timer it would stop every call's audio.
    try {
      this.deps.onTick(now);
    } catch (error) {
      this.deps.logger.error({ err: error }, 'the meter failed on a tick');
    }
    for (const call of this.calls.values()) if (call.attached) this.tickCall(call, now);
    if (this.nextTick < now - 10 * TICK_MS) this.nextTick = now;
    this.schedule();
  }

  /** One call's frames, recording and media watchdog. */
  private tickCall(call: LiveCall, now: number): void {
    const { logger } = this.deps;
    const callId = call.session.spec.callId;
    // One call's failure is that call's: thrown from this timer it would end the process, every call in it.
    try {
      call.session.tick(now);
      call.recorder?.tick(now);
      if (call.session.currentStatus === 'in-progress' && now - call.lastMediaAt > MEDIA_TIMEOUT_MS) {
        logger.warn({ callId }, 'no media for 5 s; ending the call');
        call.session.send({ type: 'CONNECTION_LOST' });
      }
    } catch (error) {
      logger.error({ err: error, callId }, 'the call failed on its tick');
      call.attached = false;
      try {
        call.session.send({ type: 'FAIL', reason: 'The call failed.' });
      } catch (again) {
        // No longer vouched for by this process, the orphan sweep ends and charges it as of its last heartbeat.
        logger.error({ err: again, callId }, 'the failed call could not be ended; left to the orphan sweep');
        this.calls.delete(callId);
        // What it had recorded stays readable; the sweep finds the file by its name.
        call.recorder?.close().catch((error: unknown) => logger.warn({ err: error, callId }, 'the recording of an abandoned call could not be closed'));
        this.deps.abandoned(call);
      }
    }
  }
}
