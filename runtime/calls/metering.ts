import type { DatabasePool, DatabaseTransactionConnection } from 'slonik';
import { PlatformError } from '../errors.js';
import { insertHold, keepHold, lockUnreserved, renewHolds, type HoldRenewal } from '../ledger/holds.js';
import type { Logger } from '../logger.js';
import { callCosts, type CallRate } from '../prices.js';
import type { CallEnd } from '../voice/spec.js';
import type { LiveCall } from './registry.js';

/**
 * What live calls cost while they run, and the cut-off, over one balance shared by every process:
 * each call holds (in `balance_holds`) what it may cost up to a little ahead, taken when it starts
 * and raised every few seconds for all of this process's calls in one transaction, out of what the
 * owner's other calls and messages, on any process, have not reserved. Once a second, a call
 * whose cost would soon pass its hold is told to say goodbye, so it ends within what it holds.
 * The hold goes when the call's end is charged (`chargeEnded`), in the same transaction.
 */

/** How often running costs are checked against the holds. */
const METER_MS = 1_000;
/** A call is told to say goodbye while this much talk time is still held for it. */
const GOODBYE_RESERVE_S = 10;
/** How often this process renews the holds of its calls (one transaction for all of them). */
const HOLD_RENEW_MS = 5_000;
/**
 * A hold covers the call's cost so far and this much more talk: more than the goodbye reserve and
 * a renewal period, so a call whose renewals succeed is never cut off; little, so calls and
 * messages of the same owner elsewhere are not kept from what the balance still covers.
 */
const HOLD_AHEAD_S = 30;
/**
 * A hold not renewed for this long lapses (its process stopped, or lost the database): by then its
 * call's own meter has ended it, since what it holds lasts HOLD_AHEAD_S past the last renewal.
 */
const HOLD_EXPIRY_S = HOLD_AHEAD_S + HOLD_RENEW_MS / 1000;

/** What an ended call costs: seconds billed, the carrier's part and the total, in dollars. */
export type CallCosts = ReturnType<typeof callCosts>;

/** A call about to start with its hold taken, for {@link CallMeter.admitted}. */
export interface OpenedCall {
  readonly id: number;
  /** USD held for it. */
  readonly held: number;
}

const perSecond = (rate: CallRate) => rate.platform + rate.carrier;

export class CallMeter {
  /** USD held for each live call of this process, as the last renewal left it. */
  private readonly holds = new Map<number, number>();
  private lastMeter = 0;
  private lastRenewal = 0;
  private renewing = false;

  constructor(
    private readonly deps: {
      readonly pool: DatabasePool;
      readonly logger: Logger;
      /** The live calls to meter. */
      calls(): Iterable<LiveCall>;
    },
  ) {}

  /**
   * Writes a call (`insert`, returning its id) with its first hold, in one transaction: its goodbye
   * and its first stretch of talk (less, when that is all the owner has not reserved).
   * @throws PlatformError `insufficient_balance` (nothing written) when what the owner has not
   *   reserved does not cover even the goodbye.
   */
  async opening(ownerId: number, rate: CallRate, insert: (tx: DatabaseTransactionConnection) => Promise<number>): Promise<OpenedCall> {
    return this.deps.pool.transaction(async (tx) => {
      const unreserved = await lockUnreserved(tx, ownerId);
      if (unreserved <= 0 || unreserved < perSecond(rate) * GOODBYE_RESERVE_S) throw new PlatformError('insufficient_balance');
      const id = await insert(tx);
      const held = Math.min(unreserved, callCosts(rate, HOLD_AHEAD_S * 1000).total);
      await insertHold(tx, { callId: id, userId: ownerId, amount: held, expirySeconds: HOLD_EXPIRY_S });
      return { id, held };
    });
  }

  /**
   * A call taken over from another process (its media stream joined here): its hold is kept (taken
   * anew, as far as the owner's balance allows, if it lapsed) and metered here from now.
   */
  async adopted(callId: number, ownerId: number, rate: CallRate): Promise<OpenedCall> {
    return this.deps.pool.transaction(async (tx) => {
      const unreserved = await lockUnreserved(tx, ownerId);
      const fresh = Math.max(0, Math.min(unreserved, callCosts(rate, HOLD_AHEAD_S * 1000).total));
      return { id: callId, held: await keepHold(tx, { callId, userId: ownerId, amount: fresh, expirySeconds: HOLD_EXPIRY_S }) };
    });
  }

  /** The call opened with `opening` is live: it is metered against its hold, renewed from now. */
  admitted(opened: OpenedCall): void {
    this.holds.set(opened.id, opened.held);
  }

  /** A call ended: its costs. Its hold is no longer renewed; it goes with its charge. */
  ended(call: LiveCall, end: CallEnd): CallCosts {
    this.holds.delete(call.session.spec.callId);
    return callCosts(call.rate, end.answeredAt === null ? 0 : end.endedAt - end.answeredAt);
  }

  /** On the call ticker: meters once a second and starts a renewal of the holds every few seconds. */
  tick(now: number): void {
    if (now - this.lastRenewal >= HOLD_RENEW_MS && !this.renewing) {
      this.lastRenewal = now;
      this.renew(now);
    }
    if (now - this.lastMeter < METER_MS) return;
    this.lastMeter = now;
    this.meter(now);
  }

  /** Running cost of a live call, by the clock. */
  private runningCost(call: LiveCall, now: number): number {
    const answered = call.session.answeredTime;
    return answered === null ? 0 : callCosts(call.rate, now - answered).total;
  }

  /** Ends calls (with a goodbye) whose cost would soon pass their hold. */
  private meter(now: number): void {
    for (const call of this.deps.calls()) {
      if (call.cutOff || call.session.currentStatus !== 'in-progress') continue;
      if (perSecond(call.rate) <= 0) continue;
      const held = this.holds.get(call.session.spec.callId) ?? 0;
      if (this.runningCost(call, now) + perSecond(call.rate) * GOODBYE_RESERVE_S >= held) {
        call.cutOff = true;
        this.deps.logger.info({ callId: call.session.spec.callId, userId: call.ownerId, held }, 'balance nearly spent; ending the call');
        call.session.send({ type: 'END', status: 'ended_by_assistant', goodbye: { kind: 'goodbye', reason: 'balance' } });
      }
    }
  }

  /**
   * Raises every live call's hold to its cost so far and HOLD_AHEAD_S more, as far as its owner's
   * balance allows, and pushes its expiry on: one transaction, off the audio path. A failure keeps
   * the holds as they were (the calls then end within them).
   */
  private renew(now: number): void {
    const renewals: HoldRenewal[] = [];
    for (const call of this.deps.calls()) {
      const callId = call.session.spec.callId;
      if (!this.holds.has(callId)) continue;
      const answered = call.session.answeredTime;
      const target = callCosts(call.rate, (answered === null ? 0 : now - answered) + HOLD_AHEAD_S * 1000).total;
      renewals.push({ callId, userId: call.ownerId, target });
    }
    if (renewals.length === 0) return;
    this.renewing = true;
    renewHolds(this.deps.pool, renewals, HOLD_EXPIRY_S)
      .then(
        (held) => {
          // A call that ended meanwhile is not metered any more.
          for (const [callId, amount] of held) if (this.holds.has(callId)) this.holds.set(callId, amount);
        },
        (error: unknown) => this.deps.logger.warn({ err: error, calls: renewals.length }, 'the holds of live calls could not be renewed'),
      )
      .finally(() => (this.renewing = false));
  }
}
