import { randomUUID } from 'node:crypto';
import { findAssistant, type AssistantRow } from '../assistants/repository.js';
import { within } from '../bounded.js';
import { PlatformError } from '../errors.js';
import type { Logger } from '../logger.js';
import { isoTimestamp } from '../time.js';
import { CallSession } from '../voice/session.js';
import type { CallEnd } from '../voice/spec.js';
import type { CallRate } from '../prices.js';
import { rateOf } from './charges.js';
import { createCallCommands, type CallCommands } from './commands.js';
import { carrierCallIdOf, handedOver, type ClaimedCall } from './holding.js';
import type { AnsweredBy, CarrierStatus } from './carriers/types.js';
import { finishRecording, untilSaved, writeEnd } from './ending.js';
import { CallEventLog, writeEvents } from './events.js';
import { callSessionHooks } from './sessionHooks.js';
import { CallMeter, type CallCosts } from './metering.js';
import { createCallPresence, defaultCallPresence, type CallPresence } from './presence.js';
import type { WavRecorder } from './recording.js';
import { LiveCalls, liveCallEntry, type LiveCall, type StreamToken } from './registry.js';
import { insertCall } from './repository.js';
import { attemptDialled } from '../campaigns/dialling.js';
import { callSpec } from './spec.js';
import type { NewLiveCall, VoiceDeps } from './voiceDeps.js';

export type { NewLiveCall, VoiceDeps, VoiceMetrics } from './voiceDeps.js';

/**
 * A live call from its start to its saved end: the row and the session created together (or the
 * session made from the row, on the process its media stream joined), every status change saved in order, the end saved with its charge and webhook in one transaction (and
 * tried again while the database is away), heartbeats and the orphan sweep, and a stop that
 * drains, ends what is left and waits for every end to be saved.
 */

/** At its end, a stop waits this long at most for ends still being saved and carriers still placing calls. */
const STOP_SAVE_MS = 10_000;
/** At a stop, a call's goodbye may take this long before the call is ended without it. */
export const SHUTDOWN_GOODBYE_MS = 10_000;

/** What a browser's socket is told when its call's owner hangs it up. */
const HUNG_UP_BY_OWNER = 'call ended by its owner';

const shuttingDown = () => new PlatformError('shutting_down', { headers: { 'Retry-After': '5' } });

export class CallLifecycle {
  readonly calls: LiveCalls;
  /** This process, as `calls.holder` names the process holding a call. */
  readonly holder = randomUUID();
  private readonly meter: CallMeter;
  private readonly presence: CallPresence;
  /** Resolve once a call has ended and its end is saved; kept from its start until then. */
  private readonly endedWaiters = new Map<number, Promise<void>>();
  /** Calls whose end is being saved, perhaps again after a failure. */
  private readonly saving = new Set<number>();
  private readonly stopping = new AbortController();
  /** Outbound calls the carrier is still placing: a stop waits for them (and hangs up) before it ends. */
  private readonly placing = new Set<Promise<void>>();
  /** Ends not yet saved (with their charges and webhooks): a stop waits for them before the pool closes. */
  private readonly unsaved = new Set<Promise<void>>();
  private readonly quietWaiters: Array<() => void> = [];
  /** Calls between the draining check and the registry: a stop waits for them to arrive. */
  private starting = 0;
  private stopped = false;
  /** A stop has begun: no call is started any more. */
  private drainingCalls = false;
  /** The stop is ending the live calls: one whose start was under way is ended as it arrives. */
  private ending = false;
  /** Requests to this process's calls from other processes (a hang-up). */
  private readonly commands: CallCommands;

  constructor(private readonly deps: VoiceDeps) {
    this.calls = new LiveCalls({
      clock: deps.clock,
      logger: deps.logger,
      recordingsDir: deps.recordingsDir,
      onTick: (now) => this.meter.tick(now),
      abandoned: (call) => this.settled(call),
      droppedCallerFrame: deps.metrics ? () => deps.metrics!.droppedCallerFrame() : undefined,
    });
    this.meter = new CallMeter({ pool: deps.pool, logger: deps.logger, calls: () => this.calls.values() });
    this.presence = createCallPresence({
      pool: deps.pool,
      clock: deps.clock,
      logger: deps.logger,
      timings: deps.presence ?? defaultCallPresence,
      recordingsDir: deps.recordingsDir,
      recordingUrl: deps.recordingUrl,
      holder: this.holder,
      held: () => this.calls.beats(this.saving),
      written: (beats) => this.calls.beatsWritten(beats),
      settled: () => deps.wakeWebhooks(),
      lost: (ids) => this.lost(ids),
      afterBeat: () => this.afterBeat(),
      sweeps: deps.sweeps,
    });
    this.presence.start({ exclusive: deps.exclusiveDatabase ?? false });
    this.commands = createCallCommands({
      pool: deps.pool,
      databaseUrl: deps.databaseUrl,
      logger: deps.logger,
      holder: this.holder,
      held: () => [...this.calls.ids()],
      holds: (id) => this.calls.has(id),
      carryOut: (id, command) => {
        const call = this.calls.get(id);
        if (!call) return;
        if (command.command === 'hangup') this.hangUp(call);
        else deps.carrierStatus?.(command.carrier, id, command.carrierCallId, command.status as CarrierStatus | undefined, command.answeredBy as AnsweredBy | undefined);
      },
      released: (ids) => this.release(ids),
    });
  }

  /** A stop has begun: new calls are refused. */
  get draining(): boolean {
    return this.drainingCalls;
  }

  /**
   * Starts a call: its row, its session and its place in the registry. An inbound call starts
   * ringing; the media socket joins it with the returned token.
   * @throws PlatformError `shutting_down` (with `Retry-After`) once a stop has begun;
   *   `insufficient_balance` when the owner has nothing left.
   */
  async start(assistant: AssistantRow, call: NewLiveCall, requestId: string | undefined): Promise<{ id: number; token: string; entry: LiveCall }> {
    if (this.drainingCalls) throw shuttingDown();
    this.starting++;
    try {
      return await this.register(assistant, call, requestId);
    } finally {
      this.starting--;
      this.checkQuiet();
    }
  }

  /** Keeps a carrier's placing of an outbound call, which a stop waits for. */
  placingCall(placing: Promise<void>): void {
    const placed: Promise<void> = placing
      .catch((error: unknown) => this.deps.logger.error({ err: error }, 'a call placed with the carrier could not be followed up'))
      .finally(() => this.placing.delete(placed));
    this.placing.add(placed);
  }

  /** Saves a change of a live call after those before it; a failure is logged, not thrown. */
  persist(call: LiveCall, work: () => Promise<void>): void {
    call.persisting = call.persisting.then(work).catch((error: unknown) => this.deps.logger.error({ err: error, callId: call.session.spec.callId }, 'call state could not be saved'));
  }

  /** Tells the carrier to stop a call that was never answered here, unless the carrier ended it itself. */
  hangUpUnanswered(call: LiveCall): Promise<void> {
    return this.hangUpAtCarrier(call, call.session.spec.type === 'outbound' ? 'ringing' : 'connected');
  }

  /** Tells the carrier to end the call (in `state`), unless the carrier ended it itself. */
  private async hangUpAtCarrier(call: LiveCall, state: 'ringing' | 'connected'): Promise<void> {
    if (call.carrierEnded || !call.carrier) return;
    const callId = call.session.spec.callId;
    // Placed by another process, whose carrier gave the call's id after its stream joined here.
    call.carrierCallId ??= await carrierCallIdOf(this.deps.pool, callId).catch(() => null);
    if (call.carrierCallId === null) return;
    await call.carrier.hangUp(call.carrierCallId, state).catch((error: unknown) =>
      this.deps.logger.debug({ err: error, callId }, 'the carrier did not take the hang-up (the call may have ended there first)'),
    );
  }

  /**
   * Its owner hangs the call up: it ends at once as `ended` (a browser's socket closes saying so),
   * its end is saved like any other, and the carrier is told to hang up.
   */
  hangUp(call: LiveCall): void {
    call.endReason ??= 'hangup';
    call.session.hangUp(HUNG_UP_BY_OWNER);
  }

  /** Whether this process holds `callId`, live or with its end still being saved. */
  holds(callId: number): boolean {
    return this.endedWaiters.has(callId);
  }

  /** Resolves once the call has ended and its end is saved (with its webhook queued). */
  whenEnded(callId: number): Promise<void> {
    return this.endedWaiters.get(callId) ?? Promise.resolve();
  }

  /** Ends and charges the calls stopped processes left open (also run every sweep); returns their ids. */
  settleOrphans(options?: { all?: boolean }): Promise<number[]> {
    return this.presence.settleOrphans(options);
  }

  /** The first step of a stop: no new call; live calls go on. */
  drain(): void {
    this.drainingCalls = true;
  }

  /** Resolves once this process holds no call: none live, none starting, every end saved. */
  quiet(): Promise<void> {
    return new Promise((resolve) => {
      this.quietWaiters.push(resolve);
      this.checkQuiet();
    });
  }

  /**
   * Ends the calls still live at a stop, as `ended`: an answered call whose media is connected
   * first hears a goodbye (up to `goodbyeMs`, or until `cutShort` settles; 0 skips it), and then
   * every end is saved, with its charge and webhook, before this resolves. Calls that arrive
   * meanwhile are ended too. The goodbye's bound is real time, like every bound of a stop: the
   * supervisor waiting on the process measures it so.
   */
  async endAll(goodbyeMs: number = SHUTDOWN_GOODBYE_MS, cutShort?: Promise<void>): Promise<void> {
    this.drainingCalls = true;
    this.ending = true;
    const calls = [...this.calls.values()];
    if (calls.length > 0) this.deps.logger.info({ calls: calls.length, goodbyeMs }, 'ending the calls still live');
    for (const call of calls) {
      const session = call.session;
      call.endReason ??= 'shutdown';
      if (goodbyeMs > 0 && call.attached && session.currentStatus === 'in-progress') session.send({ type: 'END', status: 'ended', goodbye: { kind: 'goodbye', reason: 'shutdown' } });
      else session.end('ended');
    }
    const allEnded = Promise.all(calls.map((call) => call.ended));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, goodbyeMs);
      void Promise.race([allEnded, cutShort ?? allEnded]).then(() => (clearTimeout(timer), resolve()));
    });
    for (const call of calls) {
      // A goodbye still going (or one begun before the stop): the call ends without the rest of it.
      call.session.end('ended');
      if (call.session.live) call.session.send({ type: 'CONNECTION_LOST' });
    }
    await this.quiet();
  }

  /**
   * Stops the ticker, heartbeats and sweeps (a beat or sweep being written is waited for). A
   * call still live (there is none after `endAll`) is ended without a goodbye; an end the
   * database still refuses is tried once more and then left to the sweep of the next start
   * (which charges it up to when it was last heard).
   */
  async stop(): Promise<void> {
    this.drainingCalls = true;
    this.stopped = true;
    this.stopping.abort();
    this.calls.stop();
    await this.commands.close();
    for (const call of [...this.calls.values()]) {
      call.endReason ??= 'shutdown';
      call.session.end('ended');
      if (call.session.live) call.session.send({ type: 'CONNECTION_LOST' });
    }
    // A call the carrier places only now is hung up at once (its entry is gone); one it never
    // answers about is left to its own timeout there.
    await within(Promise.all([...this.placing, ...this.unsaved]), STOP_SAVE_MS);
    // A heartbeat or sweep still being written finishes before the pool closes under it.
    await within(this.presence.stop(), STOP_SAVE_MS);
  }

  private async register(assistant: AssistantRow, call: NewLiveCall, requestId: string | undefined): Promise<{ id: number; token: string; entry: LiveCall }> {
    const { pool, clock } = this.deps;
    const rate = await rateOf(pool, assistant.user_id, assistant.mode, call.type, call.assistantNumber);
    const token = this.calls.issueToken();
    const startedAt = clock.now();
    // The row is written with the call's hold on the balance, or not at all.
    const opened = await this.meter.opening(assistant.user_id, rate, async (tx) => {
      const id = await insertCall(tx, {
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
        carrierName: call.carrierName,
        holder: this.holder,
        streamTokenHash: token.hash,
        streamExpiresAt: isoTimestamp(token.expires),
        startedAt: isoTimestamp(startedAt),
        campaign: call.campaign,
      });
      // A campaign's call is made once per attempt, and only while its claim holds.
      if (call.campaign && !(await attemptDialled(tx, call.campaign, id))) throw new PlatformError('campaign_attempt_taken');
      return id;
    });
    const id = opened.id;
    const logger = this.deps.logger.child({ callId: id, userId: assistant.user_id, reqId: requestId });
    const entry = await this.open(assistant, { id, ...call, rate, startedAt, firstSeq: 1, token }, logger);
    this.meter.admitted(opened);
    this.live(entry);
    if (this.ending) {
      // Begun before the stop, arrived after it ended the live calls: ended (failed, never answered) and refused.
      entry.session.end('ended');
      throw shuttingDown();
    }
    if (call.status === 'ringing') entry.session.send({ type: 'RINGING' });
    return { id, token: token.token, entry };
  }

  /**
   * Runs here a call whose media stream joined this process, created (and held until now) by
   * another: its session is made from the call's row, in the status the row has. Undefined when it
   * cannot run (its assistant deleted meanwhile, a stop begun, no balance left): the stream is
   * refused, and the call, held by no process, is ended by the orphan sweep.
   */
  async adopt(claimed: ClaimedCall, requestId: string | undefined): Promise<LiveCall | undefined> {
    const { pool, logger: parent } = this.deps;
    const logger = parent.child({ callId: claimed.id, userId: claimed.user_id, reqId: requestId });
    if (this.drainingCalls) return undefined;
    const assistant = claimed.assistant_id === null ? null : await findAssistant(pool, claimed.user_id, claimed.assistant_id);
    if (!assistant) {
      logger.warn('a media stream joined a call whose assistant is gone; the call is left to the sweep');
      return undefined;
    }
    this.starting++;
    try {
      const rate = await rateOf(pool, claimed.user_id, assistant.mode, claimed.type, claimed.assistant_phone_number);
      const opened = await this.meter.adopted(claimed.id, claimed.user_id, rate);
      const entry = await this.open(assistant, {
        id: claimed.id,
        type: claimed.type,
        assistantNumber: claimed.assistant_phone_number,
        clientNumber: claimed.client_phone_number,
        variables: claimed.variables,
        carrierCallId: claimed.carrier_call_id,
        carrierName: claimed.carrier_name,
        rate,
        // Offsets in its events count from the call's start, as the process that created it wrote it.
        startedAt: claimed.started_ms,
        firstSeq: claimed.last_seq + 1,
        token: undefined,
      }, logger);
      this.meter.admitted(opened);
      this.live(entry);
      if (this.drainingCalls) {
        entry.session.end('ended');
        return undefined;
      }
      if (claimed.status === 'ringing') entry.session.send({ type: 'RINGING' });
      logger.info({ from: claimed.previous }, 'took over a call whose media stream joined here');
      return entry;
    } catch (error) {
      logger.warn({ err: error }, 'a call whose media stream joined here could not be taken over; the call is left to the sweep');
      return undefined;
    } finally {
      this.starting--;
      this.checkQuiet();
    }
  }

  /** The session and registry entry of a call whose row exists. */
  private async open(assistant: AssistantRow, call: Omit<NewLiveCall, 'status'> & { id: number; rate: CallRate; startedAt: number; firstSeq: number; token: StreamToken | undefined }, logger: Logger): Promise<LiveCall> {
    const { clock } = this.deps;
    const id = call.id;
    const rate = call.rate;
    const spec = await callSpec(this.deps, assistant, { callId: id, type: call.type, variables: call.variables });
    let entry: LiveCall | undefined;
    const events = new CallEventLog(id, call.startedAt, logger, call.firstSeq);
    const session = new CallSession(spec, clock, logger, callSessionHooks(this.deps, spec, () => entry, events, { persist: (call, work) => this.persist(call, work), finish: (call, end) => this.finish(call, end), holder: this.holder }));
    entry = liveCallEntry({
      session,
      ownerId: assistant.user_id,
      rate,
      record: assistant.record,
      evaluate: assistant.post_call_evaluation && assistant.post_call_schema.length > 0,
      mode: spec.mode,
      tokenHash: call.token?.hash ?? Buffer.alloc(0),
      tokenExpires: call.token?.expires ?? 0,
      carrierCallId: call.carrierCallId,
      carrierName: call.carrierName,
      carrier: call.carrierName === null ? undefined : this.deps.carriers.of(call.carrierName),
      lastMediaAt: clock.now(),
      events,
    });
    return entry;
  }

  /** The entry is live here: in the registry, waited for, vouched for. */
  private live(entry: LiveCall): void {
    this.endedWaiters.set(entry.session.spec.callId, entry.ended);
    this.calls.add(entry);
    this.presence.arm();
  }

  /**
   * Calls another process holds now (their media stream joined there): they leave this process
   * without an end; their sessions stop (nothing is saved, and the carrier is not told).
   */
  private release(ids: readonly number[]): void {
    for (const id of ids) {
      const call = this.calls.get(id);
      if (!call || call.released) continue;
      call.released = true;
      this.deps.logger.info({ callId: id }, 'a call whose media stream joined another process is held there now');
      call.session.end('ended');
    }
  }

  /** The session ended: out of the registry, the phone stopped if it still rings, and the end saved. */
  private finish(call: LiveCall, end: CallEnd): void {
    const id = call.session.spec.callId;
    this.calls.remove(call);
    const costs = this.meter.ended(call, end);
    if (call.released) {
      this.settled(call);
      return;
    }
    call.events.record('end', end.endedAt, { status: end.status, duration: end.durationSeconds, reason: call.endReason });
    // Its owner hung it up: the carrier ends it too (closing its media stream alone may not).
    if (end.answeredAt !== null && call.endReason === 'hangup') void this.hangUpAtCarrier(call, 'connected');
    const evaluate = call.evaluate && end.answeredAt !== null && end.transcript !== '';
    const recorder = call.recorder;
    call.recorder = undefined;
    this.persist(call, async () => {
      const wrote = await this.saveEnd(call, end, { costs, recorder, evaluate });
      // The platform gave up first (ringing_time, never connected): the phone must stop ringing,
      // unless its stream joined another process meanwhile (which then holds the call, and its end).
      if (end.answeredAt === null && wrote) await this.hangUpUnanswered(call);
    });
    const saved = call.persisting;
    this.unsaved.add(saved);
    void saved.then(() => {
      this.unsaved.delete(saved);
      this.settled(call);
    });
  }

  /**
   * Writes an ended call: its recording finished, its row, charge and webhook in one transaction
   * (tried until the database takes it), then its evaluation and transcript index.
   */
  private async saveEnd(call: LiveCall, end: CallEnd, { costs, recorder, evaluate }: { costs: CallCosts; recorder: WavRecorder | undefined; evaluate: boolean }): Promise<boolean> {
    const { logger } = this.deps;
    const id = call.session.spec.callId;
    const recordingPath = await finishRecording(this.deps, id, recorder);
    let wrote = false;
    const saved = await this.saveWithRetries(id, () => writeEnd(this.deps, call, end, { holder: this.holder, costs, recordingPath, evaluate }));
    wrote = saved.wrote;
    call.events.written(saved.events);
    if (!wrote) return false;
    if (evaluate) this.deps.evaluate(id);
    await this.deps.indexCall(id).catch((error: unknown) => logger.error({ err: error, callId: id }, 'the transcript could not be indexed'));
    this.deps.wakeWebhooks();
    if (end.failure) logger.warn({ callId: id, reason: end.failure }, 'call failed');
    return true;
  }

  /** Saves a call's end, trying again while the database is away (`untilSaved`); the heartbeat vouches for it meanwhile. */
  private async saveWithRetries<T>(id: number, save: () => Promise<T>): Promise<T> {
    this.saving.add(id);
    this.presence.arm();
    try {
      const { clock, logger, endSaveRetryMs } = this.deps;
      return await untilSaved({ clock, logger, callId: id, retries: endSaveRetryMs, stopped: () => this.stopped, signal: this.stopping.signal }, save);
    } finally {
      this.saving.delete(id);
    }
  }

  /** The call's end is saved (or it was abandoned to the sweep): its waiters go, and a stop may find the process quiet. */
  private settled(call: LiveCall): void {
    call.resolveEnded();
    this.endedWaiters.delete(call.session.spec.callId);
    this.checkQuiet();
  }

  /** Tells those waiting for the process to hold no call that it holds none. */
  private checkQuiet(): void {
    if (this.calls.size === 0 && this.starting === 0 && this.unsaved.size === 0) for (const waiter of this.quietWaiters.splice(0)) waiter();
  }

  /**
   * After each heartbeat: the live calls' new events written in one statement (kept for the next
   * beat, or the end, should it fail), then the requests waiting for them taken.
   */
  private async afterBeat(): Promise<void> {
    await writeEvents(this.deps.pool, [...this.calls.values()].map((call) => call.events));
    await this.commands.takeAll();
  }

  /**
   * Calls this process could not vouch for, or whose stream joined here but could not be recorded
   * so: another process holds them now (their stream joined there), or another process's sweep
   * ended them while this one could not vouch for them.
   */
  async lost(ids: readonly number[]): Promise<void> {
    const moved = new Set(await handedOver(this.deps.pool, this.holder, ids));
    this.release([...moved]);
    for (const id of ids) {
      if (moved.has(id)) continue;
      const call = this.calls.get(id);
      if (!call) continue;
      // Charged and notified already, up to when it was last heard: going on would be talk nobody pays for.
      this.deps.logger.warn({ callId: id }, "a live call was ended by another server's sweep while this one could not vouch for it; ending it here");
      call.session.end('ended');
    }
  }
}
