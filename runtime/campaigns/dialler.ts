import { randomUUID } from 'node:crypto';
import { UniqueIntegrityConstraintViolationError, type DatabasePool, type DatabaseTransactionConnection } from 'slonik';
import type { VoiceService } from '../calls/live.js';
import type { Clock } from '../clock.js';
import { PlatformError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import { callRate } from '../prices.js';
import { isoTimestamp } from '../time.js';
import {
  claimDueLeads,
  completeCampaign,
  failLead,
  lockRunningCampaign,
  refillPace,
  releaseLead,
  returnLapsedLeads,
  runningCampaigns,
  setStatusReason,
  settleEndedLeads,
  spendPace,
  type CampaignAttempt,
  type CampaignFacts,
} from './dialling.js';
import { insideWindow, windowOf } from './window.js';

/**
 * The campaigns' dialler, run by every server process on its own clock; PostgreSQL shares the work
 * out. Each tick, one after the other (never two at once in a process):
 * 1. leads whose call ended take its outcome (dialling.ts `settleEndedLeads`);
 * 2. leads claimed by a process that stopped before their call existed go back (`returnLapsedLeads`);
 * 3. each running campaign, locked by one process at a time (others skip it this tick): completed
 *    when no lead is left; else, when its assistant can call, its window is open, and its owner's
 *    balance pays for a minute of a call, due leads are claimed, as many as its free lines
 *    (`max_concurrent_calls` less the leads being called, counted under the lock, so across every
 *    process) and its owner's pace allow; `status_reason` says why it is not dialling;
 * 4. each claimed lead's call is placed as an ordinary outbound call of the assistant, its
 *    variables the campaign's with the lead's over them (and over the assistant's defaults).
 * A tick's statements are a few per running campaign, whatever its number of leads.
 */

export interface DiallerOptions {
  readonly pool: DatabasePool;
  /** The ticks, the windows, the leases and the pace run on it. */
  readonly clock: Clock;
  readonly logger: Logger;
  readonly voice: Pick<VoiceService, 'place'>;
  /** The most campaign calls one owner starts per second (CAMPAIGN_CALLS_PER_SECOND). */
  readonly callsPerSecond: number;
  /** Between the end of a tick and the start of the next, in ms (CAMPAIGN_TICK_MS). */
  readonly tickMs: number;
  /** How long a claim waits for its call's row before another process may take the lead back (CAMPAIGN_LEASE_MS). */
  readonly leaseMs: number;
}

/** A claimed lead's call to place. */
interface Dial {
  readonly userId: number;
  readonly assistantId: number;
  readonly phoneNumber: string;
  readonly variables: Record<string, unknown>;
  readonly attempt: CampaignAttempt;
}

export interface Dialler {
  start(): void;
  /** No new claim from now on (a stop has begun); a tick under way finishes (a call it starts is refused while the process drains). */
  drain(): void;
  /** Drains, and resolves once the tick under way has finished. */
  stop(): Promise<void>;
}

/**
 * Why a running campaign does not dial now (a `status_reason`), or null when it may:
 * `assistant_unavailable` (no outbound assistant with a usable number), `outside_window`,
 * `insufficient_balance` (what the owner has not reserved does not pay a minute of a call).
 */
function notDialling(facts: CampaignFacts, now: number): string | null {
  if (facts.assistant_id === null || facts.assistant_type !== 'outbound' || facts.number_type === null || facts.number_usable !== true || facts.assistant_mode === null) return 'assistant_unavailable';
  if (!insideWindow(windowOf(facts.schedule, facts.assistant_timezone ?? 'UTC'), now)) return 'outside_window';
  const rate = callRate(facts.assistant_mode, { type: facts.number_type, country: facts.number_country ?? '' });
  if (facts.unreserved < (rate.platform + rate.carrier) * 60) return 'insufficient_balance';
  return null;
}

export function createDialler(options: DiallerOptions): Dialler {
  const { pool, clock, logger } = options;
  /** Names this process's claims (`campaign_leads.lease_holder`). */
  const holder = randomUUID();
  let stopped = false;
  let stopLoop: (() => void) | undefined;
  let current: Promise<void> | undefined;

  /** Claims the due leads of one running campaign, in the transaction that holds its lock. */
  async function claim(tx: DatabaseTransactionConnection, campaignId: number, now: number): Promise<Dial[]> {
    const at = isoTimestamp(now);
    const facts = await lockRunningCampaign(tx, campaignId);
    if (!facts) return [];
    if (!facts.open) {
      await completeCampaign(tx, campaignId, at);
      logger.info({ campaignId, userId: facts.user_id }, 'campaign completed');
      return [];
    }
    const reason = notDialling(facts, now);
    if (reason !== facts.status_reason) await setStatusReason(tx, campaignId, reason, at);
    const lines = facts.max_concurrent_calls - facts.calling;
    if (reason !== null || lines <= 0) return [];
    const allowance = await refillPace(tx, facts.user_id, options.callsPerSecond, at);
    const limit = Math.min(lines, Math.floor(allowance + 1e-9));
    if (limit <= 0) return [];
    const leads = await claimDueLeads(tx, { campaignId, limit, holder, now: at, leaseUntil: isoTimestamp(now + options.leaseMs) });
    const claimed = leads.filter((lead) => lead.status === 'calling');
    await spendPace(tx, facts.user_id, claimed.length);
    if (leads.length > claimed.length) logger.info({ campaignId, leads: leads.length - claimed.length }, 'campaign leads on the do-not-call list skipped');
    return claimed.map((lead) => ({
      userId: facts.user_id,
      assistantId: facts.assistant_id!,
      phoneNumber: lead.phone_number,
      variables: { ...facts.variables, ...lead.variables },
      attempt: { campaignId, leadId: lead.id, attempt: lead.attempts, holder },
    }));
  }

  /**
   * Places a claimed lead's call. One the platform refuses to start (a stop begun, the balance
   * short, the assistant changed) gives the lead back, its attempt not counted; a number the
   * platform cannot dial fails the lead. A carrier's refusal comes later, as the call's `failed` end.
   */
  async function place(dial: Dial): Promise<void> {
    const { attempt } = dial;
    try {
      await options.voice.place(dial.userId, { assistantId: dial.assistantId, phoneNumber: dial.phoneNumber, variables: dial.variables, campaign: attempt });
    } catch (error) {
      const at = isoTimestamp(clock.now());
      if (error instanceof ValidationError && error.errors.phone_number) {
        await failLead(pool, attempt, at);
        logger.warn({ campaignId: attempt.campaignId, leadId: attempt.leadId }, 'a campaign lead has a number that cannot be dialled; the lead failed');
        return;
      }
      await releaseLead(pool, attempt, at);
      // The attempt's call exists already (made by the claim before this one, which lapsed): the lead follows it.
      const dialled = error instanceof UniqueIntegrityConstraintViolationError && error.constraint === 'calls_campaign_attempt';
      const expected = dialled || (error instanceof PlatformError && ['shutting_down', 'insufficient_balance', 'campaign_attempt_taken'].includes(error.code));
      if (expected) logger.info({ campaignId: attempt.campaignId, leadId: attempt.leadId, reason: error instanceof PlatformError ? error.code : 'dialled' }, 'a campaign call was not started; its lead goes back');
      else logger.warn({ err: error, campaignId: attempt.campaignId, leadId: attempt.leadId }, 'a campaign call could not be started; its lead goes back');
    }
  }

  async function tick(): Promise<void> {
    const now = clock.now();
    const at = isoTimestamp(now);
    await settleEndedLeads(pool, at);
    const returned = await returnLapsedLeads(pool, at);
    if (returned > 0) logger.info({ leads: returned }, 'campaign leads whose claim lapsed before their call went back');
    for (const campaignId of await runningCampaigns(pool)) {
      if (stopped) return;
      const dials = await pool.transaction((tx) => claim(tx, campaignId, now));
      await Promise.all(dials.map(place));
    }
  }

  function run(): Promise<void> | undefined {
    if (stopped) return undefined;
    current = tick()
      .catch((error: unknown) => logger.warn({ err: error }, 'a campaign dialling tick failed'))
      .finally(() => (current = undefined));
    return current;
  }

  function drain(): void {
    stopped = true;
    stopLoop?.();
  }

  return {
    start() {
      if (stopLoop || stopped) return;
      stopLoop = clock.every(options.tickMs, run);
    },
    drain,
    async stop() {
      drain();
      await current;
    },
  };
}
