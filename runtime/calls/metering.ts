import type { DatabasePool } from 'slonik';
import { PlatformError } from '../errors.js';
import type { Logger } from '../logger.js';
import { callCosts } from '../prices.js';
import { balancesOf, userBalance } from '../users/repository.js';
import type { CallEnd } from '../voice/spec.js';
import { OwnerBalances } from './balances.js';
import type { LiveCall } from './registry.js';

/**
 * What live calls cost while they run, and the cut-off: once a second the meter adds up each
 * owner's running calls, and a call whose cost would soon pass what its owner has left is told to
 * say goodbye. The owners' balances are kept in memory (`OwnerBalances`), lowered at once when a
 * call ends and read again from the database every few seconds.
 */

/** How often the running costs are added up against the balances. */
const METER_MS = 1_000;
/** A call is told to say goodbye while this much talk time is still paid for. */
const GOODBYE_RESERVE_S = 10;
/** How often the meter reads the balances of owners with live calls from the database. */
const BALANCE_READ_MS = 10_000;

/** What an ended call costs: seconds billed, the carrier's part and the total, in dollars. */
export type CallCosts = ReturnType<typeof callCosts>;

/** An owner's balance as read for a call about to start, for {@link CallMeter.admitted}. */
export interface OpeningBalance {
  readonly ownerId: number;
  readonly balance: number;
  readonly version: number;
}

export class CallMeter {
  private readonly balances = new OwnerBalances();
  private lastMeter = 0;
  private lastBalanceRead = 0;
  private readingBalances = false;

  constructor(
    private readonly deps: {
      readonly pool: DatabasePool;
      readonly logger: Logger;
      /** The live calls to meter. */
      calls(): Iterable<LiveCall>;
    },
  ) {}

  /**
   * Reads the owner's balance before a call of theirs starts.
   * @throws PlatformError `insufficient_balance` when nothing is left.
   */
  async opening(ownerId: number): Promise<OpeningBalance> {
    const version = this.balances.versionOf(ownerId);
    const balance = await userBalance(this.deps.pool, ownerId);
    if (balance <= 0) throw new PlatformError('insufficient_balance');
    return { ownerId, balance, version };
  }

  /** The call read for with `opening` is live: its owner's balance is metered from now. */
  admitted(opening: OpeningBalance): void {
    this.balances.know(opening.ownerId, opening.balance, opening.version);
  }

  /** A call ended: its costs, taken off its owner's balance at once (before its charge is written). */
  ended(call: LiveCall, end: CallEnd): CallCosts {
    const costs = callCosts(call.rate, end.answeredAt === null ? 0 : end.endedAt - end.answeredAt);
    this.balances.ended(call.ownerId, costs.total);
    return costs;
  }

  /** The ended call's charge was committed (`charged` of `total`), or failed (0 charged). */
  committed(call: LiveCall, total: number, charged: number): void {
    this.balances.committed(call.ownerId, total, charged);
  }

  /** On the call ticker: meters once a second. */
  tick(now: number): void {
    if (now - this.lastMeter < METER_MS) return;
    this.lastMeter = now;
    this.meter(now);
  }

  /** Running cost of a live call, by the clock. */
  private runningCost(call: LiveCall, now: number): number {
    const answered = call.session.answeredTime;
    return answered === null ? 0 : callCosts(call.rate, now - answered).total;
  }

  /** Ends calls (with a goodbye) whose cost would soon pass what their owner has. */
  private meter(now: number): void {
    const spent = new Map<number, number>();
    for (const call of this.deps.calls()) spent.set(call.ownerId, (spent.get(call.ownerId) ?? 0) + this.runningCost(call, now));
    this.balances.retain(new Set(spent.keys()));
    if (now - this.lastBalanceRead >= BALANCE_READ_MS) {
      this.lastBalanceRead = now;
      this.readBalances();
    }
    for (const call of this.deps.calls()) {
      if (call.cutOff || call.session.currentStatus !== 'in-progress') continue;
      const perSecond = call.rate.platform + call.rate.carrier;
      if (perSecond <= 0) continue;
      if (spent.get(call.ownerId)! + perSecond * GOODBYE_RESERVE_S >= this.balances.available(call.ownerId)) {
        call.cutOff = true;
        this.deps.logger.info({ callId: call.session.spec.callId, userId: call.ownerId }, 'balance nearly spent; ending the call');
        call.session.send({ type: 'END', status: 'ended_by_assistant', goodbye: { kind: 'goodbye', reason: 'balance' } });
      }
    }
  }

  /** Brings the owners' balances up to date with the database (messages, operators, other processes). */
  private readBalances(): void {
    const ids = this.balances.ids();
    if (this.readingBalances || ids.length === 0) return;
    this.readingBalances = true;
    const versions = this.balances.snapshot();
    balancesOf(this.deps.pool, ids)
      .then(
        (read) => this.balances.refreshed(versions, read),
        (error: unknown) => this.deps.logger.warn({ err: error }, 'balances of live calls could not be read'),
      )
      .finally(() => (this.readingBalances = false));
  }
}
