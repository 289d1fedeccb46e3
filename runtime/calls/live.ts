import { UniqueIntegrityConstraintViolationError } from 'slonik';
import { findAssistant, findAssistantByUuid } from '../assistants/repository.js';
import { within } from '../bounded.js';
import { PlatformError, ValidationError } from '../errors.js';
import { callerNumber, inboundAssistantOf } from '../phoneNumbers/repository.js';
import type { CampaignAttempt } from '../campaigns/dialling.js';
import type { CarrierFailure } from '../voice/machine.js';
import type { MediaFormat } from '../voice/serializers/types.js';
import type { CallSession } from '../voice/session.js';
import type { CallMode, CallTransport } from '../voice/spec.js';
import { CarrierError, type AnsweredBy, type CarrierStatus, type InboundAnswer } from './carriers/types.js';
import { CallLifecycle, SHUTDOWN_GOODBYE_MS, type VoiceDeps } from './lifecycle.js';
import { claimStream, holderOf, notifyHolder, renewStreamToken, requestCallCommand } from './holding.js';
import { callEnded, findCall, setCarrierCallId } from './repository.js';
import { tokenDigest, type LiveCall, type LiveCalls } from './registry.js';
import { isoTimestamp } from '../time.js';

export { MEDIA_TIMEOUT_MS } from './registry.js';
export { SHUTDOWN_GOODBYE_MS, type VoiceDeps, type VoiceMetrics } from './lifecycle.js';

/**
 * The live-call service the routes and sockets use: a carrier's voice webhook and status
 * callbacks, outbound and web calls, the media socket's joining, and the stop. It decides what
 * each request means for a call; the calls themselves are kept by the registry (`registry.ts`),
 * started, ended and saved by the lifecycle (`lifecycle.ts`) and metered by `metering.ts`.
 *
 * Any process may take any request: a call is held by the process that created it until its
 * media stream joins, and then by the process that accepted the stream (`holding.ts`); a status
 * callback or hang-up for a call held elsewhere reaches its holder through PostgreSQL (`commands.ts`).
 */

/** What a caller hears when the server is stopping as their call comes in. */
const STOPPING: InboundAnswer = { kind: 'refuse', text: 'Sorry, this assistant cannot take your call right now. Please call again in a few minutes. Goodbye.' };
const NOT_CONNECTED: InboundAnswer = { kind: 'refuse', text: 'The number you have called is not connected to an assistant. Goodbye.' };
const NO_BALANCE: InboundAnswer = { kind: 'refuse', text: 'This assistant is not available right now. Please try again later. Goodbye.' };
const HANG_UP: InboundAnswer = { kind: 'hangup' };
const E164 = /^\+[1-9]\d{6,14}$/;
/** Statuses of a call that has not ended. */
const LIVE: ReadonlySet<string> = new Set(['initiated', 'ringing', 'in-progress']);
/** How long a hang-up asked of another process waits for the call's end to be saved before it answers without it. */
const HANG_UP_WAIT_MS = 5_000;
const HANG_UP_POLL_MS = 50;
const alreadyEnded = () => ValidationError.field('id', 'The call has already ended.');
/** How a carrier's word for a call that never connected reads in the call actor's. */
const CARRIER_FAILURES: Partial<Record<CarrierStatus, CarrierFailure>> = { busy: 'busy', 'no-answer': 'no-answer', canceled: 'no-answer', failed: 'failed' };

export class VoiceService {
  private readonly lifecycle: CallLifecycle;
  private readonly calls: LiveCalls;

  constructor(private readonly deps: VoiceDeps) {
    this.lifecycle = new CallLifecycle({ ...deps, carrierStatus: (...args) => this.localStatus(...args) });
    this.calls = this.lifecycle.calls;
  }

  /**
   * A carrier's voice webhook for a call to one of the platform's numbers (`carrier`: the route's
   * carrier, which must be the number's); returns how to answer it, which the route writes in the
   * carrier's markup.
   */
  async inbound(carrier: string, params: { to: string; from: string; carrierCallId: string; requestId?: string }): Promise<InboundAnswer> {
    const { pool } = this.deps;
    if (this.lifecycle.draining) return STOPPING;
    const owner = await inboundAssistantOf(pool, params.to, carrier);
    const assistant = owner && (await findAssistant(pool, owner.user_id, owner.id));
    if (!assistant) return NOT_CONNECTED;
    try {
      const { id, token, entry } = await this.lifecycle.start(assistant, { type: 'inbound', status: 'ringing', assistantNumber: params.to, clientNumber: params.from || null, variables: {}, carrierCallId: params.carrierCallId || null, carrierName: carrier }, params.requestId);
      entry.session.warmUp();
      return this.streamAnswer(carrier, id, token);
    } catch (error) {
      if (error instanceof PlatformError && error.code === 'shutting_down') return STOPPING;
      if (error instanceof PlatformError && error.code === 'insufficient_balance') return NO_BALANCE;
      // The carrier repeats the webhook of a call it was answered for (here or on another process).
      if (error instanceof UniqueIntegrityConstraintViolationError && error.constraint === 'calls_carrier_call_key') return (await this.repeatedWebhook(carrier, params.carrierCallId)) ?? HANG_UP;
      throw error;
    }
  }

  /**
   * A carrier's status callback for `callId`, in the words every carrier's comes down to. It must
   * come from the call's carrier and name the carrier's call once that is known (a web call has
   * none): an unsigned callback with a guessed call id must not end someone's call. The answer
   * itself is the media stream's joining; `answered` only carries an answering-machine verdict.
   * A call held by another process is told through PostgreSQL (resolves once it is asked).
   */
  async carrierStatus(carrier: string, callId: number, carrierCallId: string, status: CarrierStatus | undefined, answeredBy?: AnsweredBy): Promise<void> {
    const entry = this.calls.get(callId);
    if (entry && !entry.released) return this.localStatus(carrier, callId, carrierCallId, status, answeredBy);
    if (!status && !answeredBy) return;
    await requestCallCommand(this.deps.pool, callId, { command: 'status', carrier, carrierCallId, ...(status ? { status } : {}), ...(answeredBy ? { answeredBy } : {}) });
  }

  /** A carrier's status for a call held here; see {@link carrierStatus}. */
  private localStatus(carrier: string, callId: number, carrierCallId: string, status: CarrierStatus | undefined, answeredBy?: AnsweredBy): void {
    const entry = this.calls.get(callId);
    if (!entry || entry.carrierName !== carrier) return;
    if (entry.carrierCallId !== null && carrierCallId !== entry.carrierCallId) return;
    // Placed by another process, whose carrier gave the call's id after its stream joined here.
    if (entry.carrierCallId === null && carrierCallId && entry.session.spec.type === 'outbound') entry.carrierCallId = carrierCallId;
    const session = entry.session;
    if (answeredBy) session.answeredBy(answeredBy);
    const failure = status && CARRIER_FAILURES[status];
    if (failure || status === 'completed') entry.carrierEnded = true;
    if (status === 'ringing') session.send({ type: 'RINGING' });
    else if (failure) session.send({ type: 'CARRIER_FAILED', status: failure });
    else if (status === 'completed') session.send(session.currentStatus === 'in-progress' ? { type: 'CARRIER_COMPLETED' } : { type: 'CARRIER_FAILED', status: 'no-answer' });
  }

  /** The media formats to open sockets for: every carrier's. */
  formats(): readonly MediaFormat[] {
    return this.deps.carriers.formats;
  }

  /**
   * Places an outbound call with an `outbound` assistant that has a phone number; `variables`
   * are merged over the assistant's. A campaign's call names its lead's attempt, written with the
   * call's row (once per attempt, while the dialler's claim holds).
   * @throws ValidationError, PlatformError `assistant_not_found` / `insufficient_balance` /
   *   `shutting_down` / `campaign_attempt_taken` (the attempt's claim lapsed; nothing placed).
   */
  async place(userId: number, input: { assistantId: number; phoneNumber: string; variables: Record<string, unknown>; campaign?: CampaignAttempt }, requestId?: string): Promise<{ id: number; status: 'initiated' }> {
    const { pool } = this.deps;
    const assistant = await findAssistant(pool, userId, input.assistantId);
    if (!assistant) throw ValidationError.field('assistant_id', 'The selected assistant id is invalid.');
    if (assistant.type !== 'outbound') throw ValidationError.field('assistant_id', 'The assistant must be an outbound assistant.');
    if (assistant.phone_number_id === null) throw ValidationError.field('assistant_id', 'The assistant has no phone number to call from.');
    if (!E164.test(input.phoneNumber)) throw ValidationError.field('phone_number', 'The phone number must be in E.164 format (for example +14155550100).');
    const caller = await callerNumber(pool, assistant.phone_number_id);
    if (!caller) throw ValidationError.field('assistant_id', 'The assistant has no phone number to call from.');
    if (!caller.usable) throw ValidationError.field('assistant_id', "The assistant's phone number has lapsed: it is renewed once the balance covers its month.");
    const from = caller.phone_number;
    const { id, token, entry } = await this.lifecycle.start(assistant, { type: 'outbound', status: 'initiated', assistantNumber: from, clientNumber: input.phoneNumber, variables: input.variables, carrierCallId: null, carrierName: caller.carrier, campaign: input.campaign }, requestId);
    const carrier = entry.carrier!;
    const placing = carrier.place({ callId: id, carrier: caller.carrier, to: input.phoneNumber, from, streamUrl: `${this.wsBase()}${carrier.format.path}`, token, statusUrl: `${this.deps.publicUrl()}/api/telephony/${caller.carrier}/status?call_id=${id}` });
    this.lifecycle.placingCall(this.placed(entry, placing));
    return { id, status: 'initiated' };
  }

  /** A browser call to an assistant by its public UUID. */
  async startWebCall(assistantUuid: string, requestId?: string): Promise<{ call_id: number; websocket_url: string; token: string }> {
    const assistant = await findAssistantByUuid(this.deps.pool, assistantUuid);
    if (!assistant) throw new PlatformError('assistant_not_found');
    const { id, token } = await this.lifecycle.start(assistant, { type: 'web', status: 'initiated', assistantNumber: null, clientNumber: null, variables: {}, carrierCallId: null, carrierName: null }, requestId);
    return { call_id: id, websocket_url: `${this.wsBase()}/ws/web-call?call_id=${id}&token=${encodeURIComponent(token)}`, token };
  }

  /**
   * The media socket brings the token this process gave out for one of its own calls: it joins at
   * once, and the token's use is recorded in PostgreSQL meanwhile. Should another process have
   * used a token of the call first (a stream joined twice), the call leaves this process.
   * Undefined when the call is not one this process gave a token for: {@link claim} then.
   */
  claimHere(callId: number, token: string): CallSession | undefined {
    const { pool, clock, logger } = this.deps;
    const call = this.calls.claimHere(callId, token);
    if (!call) return undefined;
    claimStream(pool, callId, tokenDigest(token), isoTimestamp(clock.now()), this.lifecycle.holder)
      .then((claimed) => (claimed ? undefined : this.lifecycle.lost([callId])))
      .catch((error: unknown) => logger.warn({ err: error, callId }, "the stream's joining could not be recorded; the call goes on here"));
    return call.session;
  }

  /**
   * The media socket joins its call, on whichever process accepted it; one use per token, within
   * the connect timeout. The call is held here from now on: a call another process created (or
   * held) is taken over, and that process is told to let it go.
   */
  async claim(callId: number, token: string, requestId?: string): Promise<CallSession | undefined> {
    const { pool, clock } = this.deps;
    if (!Number.isSafeInteger(callId) || callId <= 0 || !token) return undefined;
    const holder = this.lifecycle.holder;
    const claimed = await claimStream(pool, callId, tokenDigest(token), isoTimestamp(clock.now()), holder);
    if (!claimed) return undefined;
    if (claimed.previous === holder) return this.calls.get(callId)?.session;
    // Told at once (and, should the notification be lost, at its next heartbeat).
    if (claimed.previous !== null) await notifyHolder(pool, callId).catch((error: unknown) => this.deps.logger.warn({ err: error, callId }, 'the process that held a call could not be told it is held here now'));
    return (await this.lifecycle.adopt(claimed, requestId))?.session;
  }

  /** Connects a claimed session to its media; returns where the socket hands the caller's frames. */
  attach(session: CallSession, transport: CallTransport): { audio(frame: Int16Array): void } {
    return this.calls.attach(session, transport);
  }

  /** Resolves once the call has ended and its end is saved (with its webhook queued). */
  whenEnded(callId: number): Promise<void> {
    return this.lifecycle.whenEnded(callId);
  }

  /**
   * Its owner hangs up a live call, wherever it runs: here it ends at once; held by another
   * process, that process is asked (a row it takes, and a notification). Either way this waits up
   * to `HANG_UP_WAIT_MS` for the end to be saved.
   * @returns whether the end is saved (false: asked, still ending).
   * @throws PlatformError `call_not_found` (not the user's); ValidationError when it has already ended.
   */
  async hangUp(userId: number, callId: number): Promise<{ ended: boolean }> {
    const { pool } = this.deps;
    const row = await findCall(pool, userId, callId);
    if (!row) throw new PlatformError('call_not_found');
    if (!LIVE.has(row.status) || (this.lifecycle.holds(callId) && !this.calls.has(callId))) throw alreadyEnded();
    const held = this.calls.get(callId);
    const local = held && !held.released && (await holderOf(pool, callId)) === this.lifecycle.holder ? held : undefined;
    if (local) {
      this.lifecycle.hangUp(local);
      // Its end is saved at once unless the database is away (then it is tried again meanwhile).
      let saved = false;
      await within(this.lifecycle.whenEnded(callId).then(() => (saved = true)), HANG_UP_WAIT_MS);
      return { ended: saved };
    }
    if (!(await requestCallCommand(pool, callId, { command: 'hangup' }))) throw alreadyEnded();
    return { ended: await this.untilEnded(callId, HANG_UP_WAIT_MS) };
  }

  /** Resolves once what the live call has changed so far (status, carrier id) is saved. */
  async saved(callId: number): Promise<void> {
    await this.calls.get(callId)?.persisting;
  }

  session(callId: number): CallSession | undefined {
    return this.calls.get(callId)?.session;
  }

  liveCount(mode?: CallMode): number {
    return this.calls.count(mode);
  }

  /** Ends and charges the calls stopped processes left open (also run every sweep); returns their ids. */
  settleOrphans(options?: { all?: boolean }): Promise<number[]> {
    return this.lifecycle.settleOrphans(options);
  }

  /**
   * The first step of a stop: no new call (an inbound one hears a polite refusal, an outbound or
   * web call is 503); live calls go on.
   */
  drain(): void {
    this.lifecycle.drain();
  }

  /** Resolves once this process holds no call: none live, none starting, every end saved. */
  quiet(): Promise<void> {
    return this.lifecycle.quiet();
  }

  /** Ends the calls still live at a stop, each with a goodbye of up to `goodbyeMs`; see {@link CallLifecycle.endAll}. */
  endAll(goodbyeMs: number = SHUTDOWN_GOODBYE_MS, cutShort?: Promise<void>): Promise<void> {
    return this.lifecycle.endAll(goodbyeMs, cutShort);
  }

  /** Stops the ticker, heartbeats and sweeps; see {@link CallLifecycle.stop}. */
  stop(): Promise<void> {
    return this.lifecycle.stop();
  }

  /** Polls the database (real time: another process saves the end) until the call has ended, up to `ms`. */
  private async untilEnded(callId: number, ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (await callEnded(this.deps.pool, callId)) return true;
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, HANG_UP_POLL_MS));
    }
  }

  private wsBase(): string {
    return this.deps.publicUrl().replace(/^http/, 'ws');
  }

  /** The answer that streams call `id` to this platform, with its stream's token. */
  private streamAnswer(carrier: string, id: number, token: string): InboundAnswer {
    return { kind: 'stream', streamUrl: `${this.wsBase()}${this.deps.carriers.of(carrier).format.path}`, callId: id, token };
  }

  /**
   * The answer to a voice webhook for a call that already has one (carriers may send it again, to
   * any process): while its stream is still to connect, the stream again with a new token (the
   * answer the carrier follows is the last); else a hang-up for this request alone.
   */
  private async repeatedWebhook(carrierName: string, carrierCallId: string): Promise<InboundAnswer | undefined> {
    if (!carrierCallId) return undefined;
    const token = this.calls.issueToken();
    const call = await renewStreamToken(this.deps.pool, carrierName, carrierCallId, token.hash);
    if (!call) return undefined;
    return call.kind === 'stream' ? this.streamAnswer(carrierName, call.id, token.token) : HANG_UP;
  }

  /** The carrier placed an outbound call (or could not): the call learns the carrier's id, or fails. */
  private placed(call: LiveCall, placing: Promise<{ carrierCallId: string }>): Promise<void> {
    const id = call.session.spec.callId;
    return placing.then(
      ({ carrierCallId }) => {
        call.carrierCallId = carrierCallId;
        this.lifecycle.persist(call, () => setCarrierCallId(this.deps.pool, id, carrierCallId));
        // Ended while the carrier was still placing it (not connected in time, the process
        // stopping): the phone it now rings must be stopped too.
        if (this.calls.get(id) !== call) return this.lifecycle.hangUpUnanswered(call);
        call.session.warmUp();
        return undefined;
      },
      (error: unknown) => {
        this.deps.logger.warn({ err: error, callId: id }, 'the carrier could not place the call');
        call.session.send({ type: 'CARRIER_FAILED', status: 'failed', reason: error instanceof CarrierError ? error.message : 'The carrier could not place the call' });
      },
    );
  }
}

export function createVoiceService(deps: VoiceDeps): VoiceService {
  return new VoiceService(deps);
}
