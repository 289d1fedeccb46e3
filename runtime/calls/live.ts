import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { UniqueIntegrityConstraintViolationError } from 'slonik';
import { findAssistant, findAssistantByUuid, type AssistantRow } from '../assistants/repository.js';
import { PlatformError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import { isoTimestamp } from '../time.js';
import { balancesOf, userBalance } from '../users/repository.js';
import type { CallStatus } from '../../schemas/calls.js';
import { OwnerBalances } from './balances.js';
import type { Carriers } from './carriers/index.js';
import type { MediaFormat } from '../voice/serializers/types.js';
import { CarrierError, type AnsweredBy, type Carrier, type CarrierStatus, type InboundAnswer } from './carriers/types.js';
import { callCosts, type CallRate } from '../prices.js';
import { endCall, insertCall, setCarrierCallId, updateCallStatus, type CallHeartbeat } from './repository.js';
import { chargeEnded, rateOf } from './charges.js';
import { within } from '../bounded.js';
import { createCallPresence, defaultCallPresence, type CallPresenceTimings } from './presence.js';
import { FRAME_MS } from '../voice/audio.js';
import { callerNumber, inboundAssistantOf } from '../phoneNumbers/repository.js';
import { WavRecorder } from './recording.js';
import { CONNECT_TIMEOUT_MS, type CarrierFailure } from '../voice/machine.js';
import { CallSession } from '../voice/session.js';
import type { CallEnd, CallMode, CallSpec, CallTransport } from '../voice/spec.js';
import { callSpec, type CallSpecDeps } from './spec.js';

/**
 * Live calls of this process: creating them (inbound webhook, outbound request, web call), the
 * one-time stream tokens that let a media socket join its call, the 20 ms ticker that paces every
 * call's outgoing audio, the watchdog that ends calls whose media stopped, and persistence of
 * every status change (the end, with its webhook, in one transaction).
 */

export interface VoiceMetrics {
  voiceToVoice(ms: number): void;
  turn(mode: CallMode): void;
  interruption(mode: CallMode): void;
  firstByte(kind: 'llm', provider: string, ms: number): void;
  frameLateness(ms: number): void;
  droppedCallerFrame(): void;
}

export interface VoiceDeps extends CallSpecDeps {
  /** The carrier serving each number's calls. */
  readonly carriers: Carriers;
  readonly logger: Logger;
  /** The public origin (PUBLIC_URL), resolved once the server listens. */
  publicUrl(): string;
  /** Where recordings are written (`DATA_DIR/recordings`). */
  readonly recordingsDir: string;
  /** The signed URL of a call's recording (for the webhook payload). */
  recordingUrl(callId: number): string;
  readonly metrics?: VoiceMetrics;
  wakeWebhooks(): void;
  /** Runs the post-call evaluation of an ended call (after its end is saved). */
  evaluate(callId: number): void;
  /** Puts an ended call's transcript in the search index. */
  indexCall(callId: number): Promise<void>;
  /** Waits before each new attempt to save a call's end; the last repeats (tests shorten them). */
  readonly endSaveRetryMs?: readonly number[];
  /** Heartbeats and the sweep of calls left by stopped processes. @defaultValue {@link defaultCallPresence} */
  readonly presence?: CallPresenceTimings;
  /**
   * The database is this process's alone (the embedded one): every call open in it at start-up was
   * left by this process's predecessor, and is settled at once rather than after the orphan age.
   */
  readonly exclusiveDatabase?: boolean;
}

/** A media stream must join its call within this, the time a call may stay unconnected. */
const TOKEN_TTL_MS = CONNECT_TIMEOUT_MS;
/** Waits before each new attempt to save a call's end; then a minute, for as long as the process runs. */
const END_SAVE_RETRY_MS = [1_000, 2_000, 5_000, 10_000, 30_000, 60_000];
/** A media stream silent this long (no frames at all) is a dropped connection. */
export const MEDIA_TIMEOUT_MS = 5_000;
/** The call ticker: every live call's due audio frames go out on it. */
const TICK_MS = 5;
/** At its end, a stop waits this long at most for ends still being saved and carriers still placing calls. */
const STOP_SAVE_MS = 10_000;
/** At a stop, a call's goodbye may take this long before the call is ended without it. */
export const SHUTDOWN_GOODBYE_MS = 10_000;
/** What a caller hears when the server is stopping as their call comes in. */
const STOPPING: InboundAnswer = { kind: 'refuse', text: 'Sorry, this assistant cannot take your call right now. Please call again in a few minutes. Goodbye.' };
const NOT_CONNECTED: InboundAnswer = { kind: 'refuse', text: 'The number you have called is not connected to an assistant. Goodbye.' };
const NO_BALANCE: InboundAnswer = { kind: 'refuse', text: 'This assistant is not available right now. Please try again later. Goodbye.' };
const HANG_UP: InboundAnswer = { kind: 'hangup' };
/** A webhook waits this long at most for the post-call evaluation. */
const EVALUATION_HOLD_MS = 10 * 60_000;
const METER_MS = 1_000;
/**
 * Caller audio a connection may deliver ahead of real time (frames bunched by the network, a
 * browser tab catching up). Beyond it frames are dropped: a client streaming faster than real time
 * cannot feed the speech vendors and the engine more audio than the call has lasted.
 */
const CALLER_AUDIO_BURST_MS = 2_000;
/** A call is told to say goodbye while this much talk time is still paid for. */
const GOODBYE_RESERVE_S = 10;
/** How often the meter reads the balances of owners with live calls from the database. */
const BALANCE_READ_MS = 10_000;
const E164 = /^\+[1-9]\d{6,14}$/;
interface Live {
  readonly session: CallSession;
  readonly ownerId: number;
  readonly rate: CallRate;
  cutOff: boolean;
  readonly record: boolean;
  readonly evaluate: boolean;
  recorder: WavRecorder | undefined;
  readonly mode: CallMode;
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
  /** What an inbound call's webhook was answered with, given again if the carrier repeats it. */
  answer: InboundAnswer | undefined;
  lastMediaAt: number;
  /** When the call's audio last went either way (caller frames in, agent frames out), by the clock. */
  heardAt: number | null;
  attached: boolean;
  persisting: Promise<void>;
  readonly ended: Promise<void>;
  resolveEnded(): void;
}

/** A call being started: where it comes from, and the carrier its number records (none for a web call). */
interface NewLiveCall {
  readonly type: CallSpec['type'];
  readonly status: 'initiated' | 'ringing';
  readonly assistantNumber: string | null;
  readonly clientNumber: string | null;
  readonly variables: Record<string, unknown>;
  readonly carrierCallId: string | null;
  readonly carrierName: string | null;
}

const digest = (token: string) => createHash('sha256').update(token).digest();

export function createVoiceService(deps: VoiceDeps) {
  const { pool, clock, logger } = deps;
  const live = new Map<number, Live>();
  const endedWaiters = new Map<number, Promise<void>>();
  /** Calls whose end is being saved, perhaps again after a failure. */
  const saving = new Set<number>();
  const stopping = new AbortController();
  let tickTimer: unknown;
  let nextTick = 0;
  let stopped = false;
  /** A stop has begun: no call is started any more. */
  let draining = false;
  /** The stop is ending the live calls: one whose start was under way is ended as it arrives. */
  let ending = false;
  /** Outbound calls the carrier is still placing: a stop waits for them (and hangs up) before it ends. */
  const placing = new Set<Promise<void>>();
  /** Calls between the draining check and `live`: a stop waits for them to arrive. */
  let starting = 0;
  /** Ends not yet saved (with their charges and webhooks): a stop waits for them before the pool closes. */
  const unsaved = new Set<Promise<void>>();
  const quietWaiters: Array<() => void> = [];
  /** Tells those waiting for the process to hold no call that it holds none. */
  function checkQuiet(): void {
    if (live.size === 0 && starting === 0 && unsaved.size === 0) for (const waiter of quietWaiters.splice(0)) waiter();
  }

  const wsBase = () => deps.publicUrl().replace(/^http/, 'ws');

  function schedule(): void {
    if (tickTimer !== undefined || stopped || live.size === 0) return;
    nextTick = Math.max(nextTick + TICK_MS, clock.now() + 1);
    tickTimer = clock.setTimeout(tick, Math.max(0, nextTick - clock.now()));
  }

  /** Running cost of a live call, by the clock. */
  function runningCost(entry: Live, now: number): number {
    const answered = entry.session.answeredTime;
    return answered === null ? 0 : callCosts(entry.rate, now - answered).total;
  }

  /** Ends calls (with a goodbye) whose cost would soon pass what their owner has. */
  function meter(now: number): void {
    const spent = new Map<number, number>();
    for (const entry of live.values()) spent.set(entry.ownerId, (spent.get(entry.ownerId) ?? 0) + runningCost(entry, now));
    balances.retain(new Set(spent.keys()));
    if (now - lastBalanceRead >= BALANCE_READ_MS) {
      lastBalanceRead = now;
      readBalances();
    }
    for (const entry of live.values()) {
      if (entry.cutOff || entry.session.currentStatus !== 'in-progress') continue;
      const perSecond = entry.rate.platform + entry.rate.carrier;
      if (perSecond <= 0) continue;
      if (spent.get(entry.ownerId)! + perSecond * GOODBYE_RESERVE_S >= balances.available(entry.ownerId)) {
        entry.cutOff = true;
        logger.info({ callId: entry.session.spec.callId, userId: entry.ownerId }, 'balance nearly spent; ending the call');
        entry.session.send({ type: 'END', status: 'ended_by_assistant', goodbye: { kind: 'goodbye', reason: 'balance' } });
      }
    }
  }
  let lastMeter = 0;
  const balances = new OwnerBalances();
  let lastBalanceRead = 0;
  let readingBalances = false;

  /** Brings the owners' balances up to date with the database (messages, operators, other processes). */
  function readBalances(): void {
    const ids = balances.ids();
    if (readingBalances || ids.length === 0) return;
    readingBalances = true;
    const versions = balances.snapshot();
    balancesOf(pool, ids)
      .then(
        (read) => balances.refreshed(versions, read),
        (error: unknown) => logger.warn({ err: error }, 'balances of live calls could not be read'),
      )
      .finally(() => (readingBalances = false));
  }

  function tick(): void {
    tickTimer = undefined;
    const now = clock.now();
    if (now - lastMeter >= METER_MS) {
      lastMeter = now;
      meter(now);
    }
    for (const entry of live.values()) {
      if (!entry.attached) continue;
      // One call's failure is that call's: thrown from this timer it would end the process, every call in it.
      try {
        entry.session.tick(now);
        entry.recorder?.tick(now);
        if (entry.session.currentStatus === 'in-progress' && now - entry.lastMediaAt > MEDIA_TIMEOUT_MS) {
          logger.warn({ callId: entry.session.spec.callId }, 'no media for 5 s; ending the call');
          entry.session.send({ type: 'CONNECTION_LOST' });
        }
      } catch (error) {
        logger.error({ err: error, callId: entry.session.spec.callId }, 'the call failed on its tick');
        entry.attached = false;
        try {
          entry.session.send({ type: 'FAIL', reason: 'The call failed.' });
        } catch (again) {
          // No longer vouched for by this process, the orphan sweep ends and charges it as of its last heartbeat.
          logger.error({ err: again, callId: entry.session.spec.callId }, 'the failed call could not be ended; left to the orphan sweep');
          live.delete(entry.session.spec.callId);
          endedWaiters.delete(entry.session.spec.callId);
          entry.resolveEnded();
          checkQuiet();
        }
      }
    }
    if (nextTick < now - 10 * TICK_MS) nextTick = now;
    schedule();
  }

  function persist(entry: Live, work: () => Promise<void>): void {
    entry.persisting = entry.persisting.then(work).catch((error: unknown) => logger.error({ err: error, callId: entry.session.spec.callId }, 'call state could not be saved'));
  }

  async function start(
    assistant: AssistantRow,
    call: NewLiveCall,
    /** The request that began the call (`X-Request-Id`), on every line the call logs. */
    requestId: string | undefined,
  ): Promise<{ id: number; token: string; entry: Live }> {
    if (draining) throw new PlatformError('shutting_down', { headers: { 'Retry-After': '5' } });
    starting++;
    try {
      return await register(assistant, call, requestId);
    } finally {
      starting--;
      checkQuiet();
    }
  }

  async function register(
    assistant: AssistantRow,
    call: NewLiveCall,
    requestId: string | undefined,
  ): Promise<{ id: number; token: string; entry: Live }> {
    const balanceVersion = balances.versionOf(assistant.user_id);
    const balance = await userBalance(pool, assistant.user_id);
    if (balance <= 0) throw new PlatformError('insufficient_balance');
    const rate = await rateOf(pool, assistant.user_id, assistant.mode, call.type, call.assistantNumber);
    const id = await insertCall(pool, {
      userId: assistant.user_id,
      assistantId: assistant.id,
      assistantName: assistant.name,
      type: call.type,
      mode: assistant.mode,
      status: call.status,
      assistantPhoneNumber: call.assistantNumber,
      clientPhoneNumber: call.clientNumber,
      variables: call.variables,
      carrierCallId: call.carrierCallId,
    });
    const spec = await callSpec(deps, assistant, { callId: id, type: call.type, variables: call.variables });
    const token = randomBytes(24).toString('base64url');
    let resolveEnded!: () => void;
    const ended = new Promise<void>((resolve) => (resolveEnded = resolve));
    endedWaiters.set(id, ended);
    let entry!: Live;
    const session = new CallSession(spec, clock, logger.child({ callId: id, userId: assistant.user_id, reqId: requestId }), {
      status: (status, at) => {
        if (status === 'initiated' || !entry) return;
        if (status === 'in-progress') entry.lastMediaAt = clock.now();
        persist(entry, () => updateCallStatus(pool, id, status as CallStatus, isoTimestamp(at)));
      },
      ended: (end) => finish(entry, end),
      transfer: async (number) => {
        if (entry.carrierCallId && entry.carrier) await entry.carrier.transfer(entry.carrierCallId, number);
      },
      voiceToVoice: (ms) => deps.metrics?.voiceToVoice(ms),
      turn: () => deps.metrics?.turn(spec.mode),
      interruption: () => deps.metrics?.interruption(spec.mode),
      firstByte: (kind, provider, ms) => deps.metrics?.firstByte(kind, provider, ms),
      agentFrame: (frame) => {
        entry.heardAt = clock.now();
        entry.recorder?.agent(frame);
      },
      frameLateness: deps.metrics ? (ms) => deps.metrics!.frameLateness(ms) : undefined,
    });
    entry = {
      session,
      ownerId: assistant.user_id,
      rate,
      cutOff: false,
      record: assistant.record,
      evaluate: assistant.post_call_evaluation && assistant.post_call_schema.length > 0,
      recorder: undefined,
      mode: spec.mode,
      tokenHash: digest(token),
      tokenExpires: clock.now() + TOKEN_TTL_MS,
      tokenUsed: false,
      carrierCallId: call.carrierCallId,
      carrierName: call.carrierName,
      carrier: call.carrierName === null ? undefined : deps.carriers.of(call.carrierName),
      carrierEnded: false,
      answer: undefined,
      lastMediaAt: clock.now(),
      heardAt: null,
      attached: false,
      persisting: Promise.resolve(),
      ended,
      resolveEnded,
    };
    balances.know(assistant.user_id, balance, balanceVersion);
    live.set(id, entry);
    presence.arm();
    if (ending) {
      // Begun before the stop, arrived after it ended the live calls: ended (failed, never answered) and refused.
      session.end('ended');
      throw new PlatformError('shutting_down', { headers: { 'Retry-After': '5' } });
    }
    if (call.status === 'ringing') session.send({ type: 'RINGING' });
    return { id, token, entry };
  }

  /** Tells the carrier to stop a call that was never answered here, unless the carrier ended it itself. */
  async function hangUpUnanswered(entry: Live): Promise<void> {
    if (entry.carrierCallId === null || entry.carrierEnded || !entry.carrier) return;
    const callId = entry.session.spec.callId;
    await entry.carrier.hangUp(entry.carrierCallId, entry.session.spec.type === 'outbound' ? 'ringing' : 'connected').catch((error: unknown) =>
      logger.debug({ err: error, callId }, 'the carrier did not take the hang-up (the call may have ended there first)'),
    );
  }

  function finish(entry: Live, end: CallEnd): void {
    const id = entry.session.spec.callId;
    if (live.get(id) === entry) live.delete(id);
    const costs = callCosts(entry.rate, end.answeredAt === null ? 0 : end.endedAt - end.answeredAt);
    balances.ended(entry.ownerId, costs.total);
    // The platform gave up first (ringing_time, never connected): the phone must stop ringing.
    if (end.answeredAt === null) void hangUpUnanswered(entry);
    const evaluate = entry.evaluate && end.answeredAt !== null && end.transcript !== '';
    const recorder = entry.recorder;
    entry.recorder = undefined;
    persist(entry, async () => {
      let recordingPath: string | null = null;
      if (recorder) {
        try {
          await recorder.close();
          recordingPath = relative(deps.recordingsDir, recorder.path);
        } catch (error) {
          logger.error({ err: error, callId: id }, 'the recording could not be finished');
        }
      }
      const saveEnd = () =>
        pool.transaction(async (tx) => {
          const wrote = await endCall(tx, id, {
            recordingPath,
            evaluationPending: evaluate,
            carrierCost: costs.carrier,
            totalCost: costs.total,
            status: end.status as CallStatus,
            transcript: end.transcript,
            duration: end.durationSeconds,
            answeredBy: end.answeredBy,
            answeredAt: end.answeredAt === null ? null : isoTimestamp(end.answeredAt),
            endedAt: isoTimestamp(end.endedAt),
          });
          if (!wrote) {
            logger.warn({ callId: id }, 'the call had already been ended (by a sweep, as of when it was last heard); this end is not saved');
            return 0;
          }
          return chargeEnded(tx, logger, { userId: entry.ownerId, callId: id, total: costs.total, recordingUrl: recordingPath ? deps.recordingUrl(id) : null, holdMs: evaluate ? EVALUATION_HOLD_MS : 0 });
        });
      let charged = 0;
      try {
        charged = await saveWithRetries(id, saveEnd);
      } finally {
        balances.committed(entry.ownerId, costs.total, charged);
      }
      if (evaluate) deps.evaluate(id);
      await deps.indexCall(id).catch((error: unknown) => logger.error({ err: error, callId: id }, 'the transcript could not be indexed'));
      deps.wakeWebhooks();
      if (end.failure) logger.warn({ callId: id, reason: end.failure }, 'call failed');
    });
    const saved = entry.persisting;
    unsaved.add(saved);
    void saved.then(() => {
      unsaved.delete(saved);
      entry.resolveEnded();
      endedWaiters.delete(id);
      checkQuiet();
    });
  }

  /**
   * The answer to a voice webhook for a call that already has one (carriers may send it again): the
   * same answer while its stream is still to connect, else a hang-up for this request alone.
   */
  function repeatedWebhook(carrierName: string, carrierCallId: string): InboundAnswer | undefined {
    if (!carrierCallId) return undefined;
    for (const entry of live.values()) {
      if (entry.carrierName === carrierName && entry.carrierCallId === carrierCallId) return entry.answer && !entry.tokenUsed ? entry.answer : HANG_UP;
    }
    return undefined;
  }

  /** The media socket joins its call; one use per token, within 5 minutes. */
  function claim(callId: number, token: string): CallSession | undefined {
    const entry = live.get(callId);
    if (!entry || entry.tokenUsed || clock.now() > entry.tokenExpires) return undefined;
    const given = digest(token);
    if (!timingSafeEqual(given, entry.tokenHash)) return undefined;
    entry.tokenUsed = true;
    return entry.session;
  }

  function attach(session: CallSession, transport: CallTransport): { audio(frame: Int16Array): void } {
    const entry = live.get(session.spec.callId);
    if (!entry) {
      transport.close();
      return { audio: () => {} };
    }
    entry.attached = true;
    entry.lastMediaAt = clock.now();
    if (entry.record) entry.recorder = new WavRecorder(join(deps.recordingsDir, `${session.spec.callId}.wav`));
    session.attach(transport);
    schedule();
    // A token bucket of audio time: refilled by the clock, FRAME_MS taken per frame.
    let allowance = CALLER_AUDIO_BURST_MS;
    let refilledAt = clock.now();
    let dropped = 0;
    return {
      audio(frame) {
        const now = clock.now();
        allowance = Math.min(CALLER_AUDIO_BURST_MS, allowance + (now - refilledAt));
        refilledAt = now;
        if (allowance < FRAME_MS) {
          if (dropped++ === 0) logger.warn({ callId: session.spec.callId }, 'caller audio arrives faster than real time; the excess is dropped');
          deps.metrics?.droppedCallerFrame();
          return;
        }
        allowance -= FRAME_MS;
        entry.lastMediaAt = now;
        entry.heardAt = now;
        if (session.currentStatus === 'in-progress') entry.recorder?.caller(frame);
        session.audio(frame);
      },
    };
  }

  /** This process's calls as its heartbeat reports them: live ones, and those whose end is still being saved. */
  function held(): CallHeartbeat[] {
    const beats: CallHeartbeat[] = [];
    for (const [id, entry] of live) beats.push({ id, heardAt: entry.heardAt === null ? null : isoTimestamp(entry.heardAt) });
    for (const id of saving) if (!live.has(id)) beats.push({ id, heardAt: null });
    return beats;
  }

  const presence = createCallPresence({
    pool,
    clock,
    logger,
    timings: deps.presence ?? defaultCallPresence,
    recordingsDir: deps.recordingsDir,
    recordingUrl: deps.recordingUrl,
    held,
    settled: () => deps.wakeWebhooks(),
    lost(ids) {
      for (const id of ids) {
        const entry = live.get(id);
        if (!entry) continue;
        // Charged and notified already, up to when it was last heard: going on would be talk nobody pays for.
        logger.warn({ callId: id }, 'a live call was ended by another server\'s sweep while this one could not vouch for it; ending it here');
        entry.session.end('ended');
      }
    },
  });
  presence.start({ exclusive: deps.exclusiveDatabase ?? false });

  /**
   * Saves a call's end, trying again while the database is away (1 s, 2 s, 5 s ... a minute
   * apart), so its transcript, costs and webhook are not left to the orphan sweep.
   */
  async function saveWithRetries<T>(id: number, save: () => Promise<T>): Promise<T> {
    saving.add(id);
    presence.arm();
    try {
      // Never given up while the process runs: the orphan sweep, the only other way a call ends,
      // knows nothing of its transcript, recording or evaluation. The heartbeat vouches for it meanwhile.
      const retries = deps.endSaveRetryMs ?? END_SAVE_RETRY_MS;
      for (let attempt = 0; ; attempt++) {
        try {
          return await save();
        } catch (error) {
          if (stopped) throw error;
          const delay = retries[Math.min(attempt, retries.length - 1)]!;
          logger[attempt < retries.length ? 'warn' : 'error']({ err: error, callId: id, attempt: attempt + 1 }, 'the end of the call could not be saved; trying again');
          await sleep(delay, undefined, { signal: stopping.signal, ref: false }).catch(() => undefined);
        }
      }
    } finally {
      saving.delete(id);
    }
  }

  return {
    /**
     * A carrier's voice webhook for a call to one of the platform's numbers (`carrier`: the route's
     * carrier, which must be the number's); returns how to answer it, which the route writes in the
     * carrier's markup.
     */
    async inbound(carrier: string, params: { to: string; from: string; carrierCallId: string; requestId?: string }): Promise<InboundAnswer> {
      const repeated = repeatedWebhook(carrier, params.carrierCallId);
      if (repeated) return repeated;
      if (draining) return STOPPING;
      const owner = await inboundAssistantOf(pool, params.to, carrier);
      const assistant = owner && (await findAssistant(pool, owner.user_id, owner.id));
      if (!assistant) return NOT_CONNECTED;
      try {
        const { id, token, entry } = await start(assistant, { type: 'inbound', status: 'ringing', assistantNumber: params.to, clientNumber: params.from || null, variables: {}, carrierCallId: params.carrierCallId || null, carrierName: carrier }, params.requestId);
        entry.answer = { kind: 'stream', streamUrl: `${wsBase()}${entry.carrier!.format.path}`, callId: id, token };
        entry.session.warmUp();
        return entry.answer;
      } catch (error) {
        if (error instanceof PlatformError && error.code === 'shutting_down') return STOPPING;
        if (error instanceof PlatformError && error.code === 'insufficient_balance') return NO_BALANCE;
        // The same call's webhook twice at once: the other request holds the call.
        if (error instanceof UniqueIntegrityConstraintViolationError && error.constraint === 'calls_carrier_call_key') return repeatedWebhook(carrier, params.carrierCallId) ?? HANG_UP;
        throw error;
      }
    },

    /**
     * A carrier's status callback for `callId`, in the words every carrier's comes down to. It must
     * come from the call's carrier and name the carrier's call once that is known (a web call has
     * none): an unsigned callback with a guessed call id must not end someone's call. The answer
     * itself is the media stream's joining; `answered` only carries an answering-machine verdict.
     */
    carrierStatus(carrier: string, callId: number, carrierCallId: string, status: CarrierStatus | undefined, answeredBy?: AnsweredBy): void {
      const entry = live.get(callId);
      if (!entry || entry.carrierName !== carrier) return;
      if (entry.carrierCallId !== null && carrierCallId !== entry.carrierCallId) return;
      const session = entry.session;
      if (answeredBy) session.answeredBy(answeredBy);
      const failures: Partial<Record<CarrierStatus, CarrierFailure>> = { busy: 'busy', 'no-answer': 'no-answer', canceled: 'no-answer', failed: 'failed' };
      const failure = status && failures[status];
      if (failure || status === 'completed') entry.carrierEnded = true;
      if (status === 'ringing') session.send({ type: 'RINGING' });
      else if (failure) session.send({ type: 'CARRIER_FAILED', status: failure });
      else if (status === 'completed') session.send(session.currentStatus === 'in-progress' ? { type: 'CARRIER_COMPLETED' } : { type: 'CARRIER_FAILED', status: 'no-answer' });
    },

    /** The media formats to open sockets for: every carrier's. */
    formats(): readonly MediaFormat[] {
      return deps.carriers.formats;
    },

    /**
     * Places an outbound call with an `outbound` assistant that has a phone number.
     * @throws ValidationError, PlatformError `assistant_not_found` / `insufficient_balance`.
     */
    async place(userId: number, input: { assistantId: number; phoneNumber: string; variables: Record<string, unknown> }, requestId?: string): Promise<{ id: number; status: 'initiated' }> {
      const assistant = await findAssistant(pool, userId, input.assistantId);
      if (!assistant) throw ValidationError.field('assistant_id', 'The selected assistant id is invalid.');
      if (assistant.type !== 'outbound') throw ValidationError.field('assistant_id', 'The assistant must be an outbound assistant.');
      if (assistant.phone_number_id === null) throw ValidationError.field('assistant_id', 'The assistant has no phone number to call from.');
      if (!E164.test(input.phoneNumber)) throw ValidationError.field('phone_number', 'The phone number must be in E.164 format (for example +14155550100).');
      const caller = await callerNumber(pool, assistant.phone_number_id);
      if (!caller) throw ValidationError.field('assistant_id', 'The assistant has no phone number to call from.');
      if (!caller.usable) throw ValidationError.field('assistant_id', "The assistant's phone number has lapsed: it is renewed once the balance covers its month.");
      const from = caller.phone_number;
      const { id, token, entry } = await start(assistant, { type: 'outbound', status: 'initiated', assistantNumber: from, clientNumber: input.phoneNumber, variables: input.variables, carrierCallId: null, carrierName: caller.carrier }, requestId);
      const carrier = entry.carrier!;
      const placed: Promise<void> = carrier
        .place({ callId: id, to: input.phoneNumber, from, streamUrl: `${wsBase()}${carrier.format.path}`, token, statusUrl: `${deps.publicUrl()}/api/telephony/${caller.carrier}/status?call_id=${id}` })
        .then(
          ({ carrierCallId }) => {
            entry.carrierCallId = carrierCallId;
            persist(entry, () => setCarrierCallId(pool, id, carrierCallId));
            // Ended while the carrier was still placing it (not connected in time, the process
            // stopping): the phone it now rings must be stopped too.
            if (live.get(id) !== entry) return hangUpUnanswered(entry);
            entry.session.warmUp();
            return undefined;
          },
          (error: unknown) => {
            logger.warn({ err: error, callId: id }, 'the carrier could not place the call');
            entry.session.send({ type: 'CARRIER_FAILED', status: 'failed', reason: error instanceof CarrierError ? error.message : 'The carrier could not place the call' });
          },
        )
        .finally(() => placing.delete(placed));
      placing.add(placed);
      return { id, status: 'initiated' };
    },

    /** A browser call to an assistant by its public UUID. */
    async startWebCall(assistantUuid: string, requestId?: string): Promise<{ call_id: number; websocket_url: string; token: string }> {
      const assistant = await findAssistantByUuid(pool, assistantUuid);
      if (!assistant) throw new PlatformError('assistant_not_found');
      const { id, token } = await start(assistant, { type: 'web', status: 'initiated', assistantNumber: null, clientNumber: null, variables: {}, carrierCallId: null, carrierName: null }, requestId);
      return { call_id: id, websocket_url: `${wsBase()}/ws/web-call?call_id=${id}&token=${encodeURIComponent(token)}`, token };
    },

    claim,
    attach,

    /** Resolves once the call has ended and its end is saved (with its webhook queued). */
    whenEnded(callId: number): Promise<void> {
      return endedWaiters.get(callId) ?? Promise.resolve();
    },

    /** Resolves once what the live call has changed so far (status, carrier id) is saved. */
    async saved(callId: number): Promise<void> {
      await live.get(callId)?.persisting;
    },

    session(callId: number): CallSession | undefined {
      return live.get(callId)?.session;
    },

    liveCount(mode?: CallMode): number {
      if (!mode) return live.size;
      let n = 0;
      for (const entry of live.values()) if (entry.mode === mode) n++;
      return n;
    },

    /** Ends and charges the calls stopped processes left open (also run every sweep); returns their ids. */
    settleOrphans: presence.settleOrphans,

    /**
     * The first step of a stop: no new call (an inbound one hears a polite refusal, an outbound or
     * web call is 503); live calls go on.
     */
    drain(): void {
      draining = true;
    },

    /** Resolves once this process holds no call: none live, none starting, every end saved. */
    quiet(): Promise<void> {
      return new Promise((resolve) => {
        quietWaiters.push(resolve);
        checkQuiet();
      });
    },

    /**
     * Ends the calls still live at a stop, as `ended`: an answered call whose media is connected
     * first hears a goodbye (up to `goodbyeMs`, or until `cutShort` settles; 0 skips it), and then
     * every end is saved, with its charge and webhook, before this resolves. Calls that arrive
     * meanwhile are ended too.
     */
    async endAll(goodbyeMs: number = SHUTDOWN_GOODBYE_MS, cutShort?: Promise<void>): Promise<void> {
      draining = true;
      ending = true;
      const entries = [...live.values()];
      if (entries.length > 0) logger.info({ calls: entries.length, goodbyeMs }, 'ending the calls still live');
      for (const entry of entries) {
        const session = entry.session;
        if (goodbyeMs > 0 && entry.attached && session.currentStatus === 'in-progress') session.send({ type: 'END', status: 'ended', goodbye: { kind: 'goodbye', reason: 'shutdown' } });
        else session.end('ended');
      }
      const allEnded = Promise.all(entries.map((entry) => entry.ended));
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, goodbyeMs);
        void Promise.race([allEnded, cutShort ?? allEnded]).then(() => (clearTimeout(timer), resolve()));
      });
      for (const entry of entries) {
        // A goodbye still going (or one begun before the stop): the call ends without the rest of it.
        entry.session.end('ended');
        if (entry.session.live) entry.session.send({ type: 'CONNECTION_LOST' });
      }
      await this.quiet();
    },

    /**
     * Stops the ticker, heartbeats and sweeps. A call still live (there is none after `endAll`) is
     * ended without a goodbye; an end the database still refuses is tried once more and then left
     * to the sweep of the next start (which charges it up to when it was last heard).
     */
    async stop(): Promise<void> {
      draining = true;
      stopped = true;
      stopping.abort();
      for (const entry of [...live.values()]) {
        entry.session.end('ended');
        if (entry.session.live) entry.session.send({ type: 'CONNECTION_LOST' });
      }
      // A call the carrier places only now is hung up at once (its entry is gone); one it never
      // answers about is left to its own timeout there.
      await within(Promise.all([...placing, ...unsaved]), STOP_SAVE_MS);
      presence.stop();
      if (tickTimer !== undefined) clock.clearTimeout(tickTimer);
    },
  };
}

export type VoiceService = ReturnType<typeof createVoiceService>;
