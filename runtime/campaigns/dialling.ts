import { sql, type CommonQueryMethods, type DatabaseTransactionConnection } from 'slonik';
import { z } from 'zod';

/**
 * The dialler's statements (the campaigns' second repository, beside the API's): the claim of due
 * leads under a running campaign's lock, the outcomes of ended calls, and the return of leads
 * whose claim lapsed before their call existed. Times are the dialler's clock, passed in as
 * `<iso_timestamp>` parameters (leases, due times and the pace are compared with it, never with
 * the database's `now()`), so a scripted clock moves the whole dialler.
 *
 * A lead's life: `pending` -> `calling` (claimed: attempts + 1, a lease) -> its call's row is written
 * with the lead and the attempt (one per attempt: `calls_campaign_attempt`), the lease dropped in
 * the same transaction -> the call ends -> `completed`, `retrying` (due again after the interval)
 * or a final outcome. A claim whose lease runs out with no call row goes back as it was, the
 * attempt not counted.
 */

/** One attempt of a lead, as its call's row records it; `holder` is the process that claimed it. */
export interface CampaignAttempt {
  readonly campaignId: number;
  readonly leadId: number;
  readonly attempt: number;
  readonly holder: string;
}

/** Call statuses that complete a lead (an answering machine aside). */
const COMPLETING = sql.array(['completed', 'ended', 'ended_by_customer', 'ended_by_assistant'], 'text');

const campaignFacts = z.object({
  id: z.number(),
  user_id: z.number(),
  schedule: z.unknown(),
  max_concurrent_calls: z.number(),
  status_reason: z.string().nullable(),
  variables: z.record(z.unknown()),
  assistant_id: z.number().nullable(),
  assistant_type: z.string().nullable(),
  assistant_mode: z.enum(['pipeline', 'multimodal', 'dualplex']).nullable(),
  assistant_timezone: z.string().nullable(),
  number_type: z.enum(['normal', 'sip', 'caller_id']).nullable(),
  number_country: z.string().nullable(),
  number_usable: z.boolean().nullable(),
  calling: z.number(),
  open: z.boolean(),
  unreserved: z.number(),
});
export type CampaignFacts = z.infer<typeof campaignFacts>;

/** The running campaigns, oldest first (the partial index `campaigns_running`). */
export async function runningCampaigns(db: CommonQueryMethods): Promise<readonly number[]> {
  return db.anyFirst(sql.type(z.object({ id: z.number() }))`SELECT id FROM campaigns WHERE status = 'running' ORDER BY id`);
}

/**
 * Locks a running campaign for this transaction (none when another process has it, or it stopped
 * running) and reads what the dialler decides by: its assistant and the assistant's number, its
 * leads being called, whether any lead is left to call, and what its owner's balance has not
 * reserved (holds of live calls deducted).
 */
export async function lockRunningCampaign(tx: DatabaseTransactionConnection, id: number): Promise<CampaignFacts | null> {
  return tx.maybeOne(sql.type(campaignFacts)`
    SELECT g.id, g.user_id, g.schedule, g.max_concurrent_calls, g.status_reason, g.variables,
      a.id AS assistant_id, a.type AS assistant_type, a.mode AS assistant_mode, a.timezone AS assistant_timezone,
      p.type AS number_type, p.country_code AS number_country, (p.paid_until IS NULL OR p.has_active_subscription) AS number_usable,
      (SELECT count(*)::int FROM campaign_leads l WHERE l.campaign_id = g.id AND l.status = 'calling') AS calling,
      EXISTS (SELECT 1 FROM campaign_leads l WHERE l.campaign_id = g.id AND l.status IN ('pending', 'retrying', 'calling')) AS open,
      (u.balance - coalesce((SELECT sum(h.amount) FROM balance_holds h WHERE h.user_id = u.id AND h.expires_at > now()), 0))::float8 AS unreserved
    FROM campaigns g
    JOIN users u ON u.id = g.user_id
    LEFT JOIN assistants a ON a.id = g.assistant_id AND a.user_id = g.user_id
    LEFT JOIN phone_numbers p ON p.id = a.phone_number_id
    WHERE g.id = ${id} AND g.status = 'running'
    FOR UPDATE OF g SKIP LOCKED`);
}

/** A running campaign with no lead left to call is completed. */
export async function completeCampaign(tx: DatabaseTransactionConnection, id: number, now: string): Promise<void> {
  await tx.query(sql.unsafe`UPDATE campaigns SET status = 'completed', status_reason = NULL, updated_at = ${now}::timestamptz WHERE id = ${id} AND status = 'running'`);
}

/** Why a running campaign is not dialling (null: it is). */
export async function setStatusReason(tx: DatabaseTransactionConnection, id: number, reason: string | null, now: string): Promise<void> {
  await tx.query(sql.unsafe`UPDATE campaigns SET status_reason = ${reason}, updated_at = ${now}::timestamptz WHERE id = ${id} AND status_reason IS DISTINCT FROM ${reason}`);
}

/**
 * The owner's pace (a token bucket shared by every process and campaign of theirs), refilled at
 * `perSecond` up to one second's worth and locked until the transaction ends.
 * @returns the calls that may start now.
 */
export async function refillPace(tx: DatabaseTransactionConnection, userId: number, perSecond: number, now: string): Promise<number> {
  return tx.oneFirst(sql.type(z.object({ allowance: z.number() }))`
    INSERT INTO campaign_pacing AS p (user_id, allowance, refilled_at) VALUES (${userId}, ${perSecond}, ${now}::timestamptz)
    ON CONFLICT (user_id) DO UPDATE SET
      allowance = least(${perSecond}::float8, p.allowance + ${perSecond}::float8 * greatest(0, extract(epoch FROM ${now}::timestamptz - p.refilled_at))),
      refilled_at = greatest(p.refilled_at, ${now}::timestamptz)
    RETURNING allowance`);
}

/** Takes `calls` from the owner's pace (after {@link refillPace} in the same transaction). */
export async function spendPace(tx: DatabaseTransactionConnection, userId: number, calls: number): Promise<void> {
  if (calls > 0) await tx.query(sql.unsafe`UPDATE campaign_pacing SET allowance = allowance - ${calls} WHERE user_id = ${userId}`);
}

const claimedLead = z.object({ id: z.number(), phone_number: z.string(), variables: z.record(z.unknown()), attempts: z.number(), status: z.string() });
export type ClaimedLead = z.infer<typeof claimedLead>;

/**
 * Claims up to `limit` due leads of a campaign (pending or retrying, due by `now`, oldest due
 * first; leads another process is claiming are skipped): each becomes `calling` with its attempt
 * counted and a lease to `leaseUntil` held by `holder`. A due lead whose number is on the owner's
 * do-not-call list is never claimed: it becomes `do-not-call` instead.
 * @returns the claimed leads (status `calling`) and those barred (status `do-not-call`).
 */
export async function claimDueLeads(
  tx: DatabaseTransactionConnection,
  claim: { campaignId: number; limit: number; holder: string; now: string; leaseUntil: string },
): Promise<readonly ClaimedLead[]> {
  return tx.any(sql.type(claimedLead)`
    WITH due AS (
      SELECT l.id, EXISTS (SELECT 1 FROM do_not_call d WHERE d.user_id = l.user_id AND d.phone_number = l.phone_number) AS barred
      FROM campaign_leads l
      WHERE l.campaign_id = ${claim.campaignId} AND l.status IN ('pending', 'retrying') AND l.next_attempt_at <= ${claim.now}::timestamptz
      ORDER BY l.next_attempt_at, l.id
      LIMIT ${claim.limit}
      FOR UPDATE OF l SKIP LOCKED)
    UPDATE campaign_leads l SET
      status = CASE WHEN due.barred THEN 'do-not-call' ELSE 'calling' END,
      attempts = l.attempts + CASE WHEN due.barred THEN 0 ELSE 1 END,
      lease_holder = CASE WHEN due.barred THEN NULL ELSE ${claim.holder} END,
      lease_until = CASE WHEN due.barred THEN NULL ELSE ${claim.leaseUntil}::timestamptz END,
      updated_at = ${claim.now}::timestamptz
    FROM due WHERE l.id = due.id
    RETURNING l.id, l.phone_number, l.variables, l.attempts, l.status`);
}

/**
 * The call of `attempt` was written (`callId`, in this transaction): the lead follows that call
 * from now on (its lease dropped, its last call recorded). False when the claim is no longer
 * `attempt.holder`'s (its lease ran out and the lead went back, or was claimed anew), or the
 * campaign stopped running since the claim (paused or cancelled a moment after it): the call must
 * then not be made.
 */
export async function attemptDialled(tx: DatabaseTransactionConnection, attempt: CampaignAttempt, callId: number): Promise<boolean> {
  const result = await tx.query(sql.unsafe`
    UPDATE campaign_leads SET last_call_id = ${callId}, lease_until = NULL
    WHERE id = ${attempt.leadId} AND campaign_id = ${attempt.campaignId} AND status = 'calling' AND lease_holder = ${attempt.holder} AND attempts = ${attempt.attempt}
      AND EXISTS (SELECT 1 FROM campaigns g WHERE g.id = ${attempt.campaignId} AND g.status = 'running')`);
  return result.rowCount > 0;
}

/**
 * A claimed lead whose call could not be started (a stop began, the balance ran short, the
 * assistant changed): back to what it was, the attempt not counted.
 */
export async function releaseLead(db: CommonQueryMethods, attempt: CampaignAttempt, now: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE campaign_leads l SET status = CASE WHEN g.status = 'cancelled' THEN 'cancelled' WHEN l.attempts > 1 THEN 'retrying' ELSE 'pending' END,
      attempts = l.attempts - 1, lease_holder = NULL, lease_until = NULL, updated_at = ${now}::timestamptz
    FROM campaigns g
    WHERE l.id = ${attempt.leadId} AND g.id = l.campaign_id AND l.status = 'calling' AND l.lease_holder = ${attempt.holder} AND l.attempts = ${attempt.attempt}
      AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.campaign_lead_id = l.id AND c.campaign_attempt = l.attempts)`);
}

/** A claimed lead that cannot be dialled at all (its number refused by the platform): failed, the attempt counted. */
export async function failLead(db: CommonQueryMethods, attempt: CampaignAttempt, now: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE campaign_leads SET status = 'failed', lease_holder = NULL, lease_until = NULL, updated_at = ${now}::timestamptz
    WHERE id = ${attempt.leadId} AND status = 'calling' AND lease_holder = ${attempt.holder} AND attempts = ${attempt.attempt}`);
}

/**
 * Leads claimed by a process that stopped before their call existed (their lease ran out by `now`,
 * and no call carries their attempt): back to what they were, the attempt not counted (`cancelled`
 * when their campaign was cancelled meanwhile). A lead whose attempt has its call follows that call.
 * @returns how many went back.
 */
export async function returnLapsedLeads(db: CommonQueryMethods, now: string): Promise<number> {
  const rows = await db.anyFirst(sql.type(z.object({ id: z.number() }))`
    WITH lapsed AS (
      SELECT l.id FROM campaign_leads l
      WHERE l.status = 'calling' AND l.lease_until < ${now}::timestamptz
        AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.campaign_lead_id = l.id AND c.campaign_attempt = l.attempts)
      FOR UPDATE OF l SKIP LOCKED)
    UPDATE campaign_leads l SET status = CASE WHEN g.status = 'cancelled' THEN 'cancelled' WHEN l.attempts > 1 THEN 'retrying' ELSE 'pending' END,
      attempts = l.attempts - 1, lease_holder = NULL, lease_until = NULL, updated_at = ${now}::timestamptz
    FROM lapsed, campaigns g
    WHERE l.id = lapsed.id AND g.id = l.campaign_id
    RETURNING l.id`);
  return rows.length;
}

/**
 * Leads whose call has ended take its outcome: an answering machine -> `voicemail`; completed,
 * ended, ended by either side -> `completed`; `busy`, `no-answer`, `failed` as they are. An
 * outcome in the campaign's `retry_on` is tried again `retry_interval_minutes` after the call's
 * end (`retrying`) until `max_attempts`, then is the lead's final status; any other outcome fails
 * the lead. A lead of a cancelled campaign that would be tried again is `cancelled`.
 * @returns how many leads were settled.
 */
export async function settleEndedLeads(db: CommonQueryMethods, now: string): Promise<number> {
  const rows = await db.anyFirst(sql.type(z.object({ id: z.number() }))`
    WITH ended AS (
      SELECT l.id, c.ended_at, g.status AS campaign_status, g.retry_interval_minutes,
        CASE WHEN o.outcome = 'completed' THEN 'completed'
          WHEN o.outcome = ANY (g.retry_on) AND l.attempts < g.max_attempts THEN CASE WHEN g.status = 'cancelled' THEN 'cancelled' ELSE 'retrying' END
          WHEN o.outcome = ANY (g.retry_on) THEN o.outcome
          ELSE 'failed' END AS status
      FROM campaign_leads l
      JOIN calls c ON c.campaign_lead_id = l.id AND c.campaign_attempt = l.attempts
      JOIN campaigns g ON g.id = l.campaign_id
      CROSS JOIN LATERAL (SELECT CASE WHEN c.answered_by = 'machine' THEN 'voicemail'
        WHEN c.status = ANY (${COMPLETING}) THEN 'completed'
        WHEN c.status IN ('busy', 'no-answer', 'failed') THEN c.status
        ELSE 'failed' END AS outcome) o
      WHERE l.status = 'calling' AND c.ended_at IS NOT NULL
      FOR UPDATE OF l SKIP LOCKED)
    UPDATE campaign_leads l SET status = ended.status,
      next_attempt_at = CASE WHEN ended.status = 'retrying' THEN ended.ended_at + make_interval(mins => ended.retry_interval_minutes) ELSE l.next_attempt_at END,
      lease_holder = NULL, lease_until = NULL, updated_at = ${now}::timestamptz
    FROM ended WHERE l.id = ended.id
    RETURNING l.id`);
  return rows.length;
}
