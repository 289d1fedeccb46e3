import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { CAMPAIGN_STATUSES, LEAD_STATUSES, RETRY_OUTCOMES, WEEK_DAYS, type CampaignStatus, type LeadStatus, type RetryOutcome, type WeekDay } from '../../schemas/campaigns.js';

/**
 * The campaigns' SQL for the API: campaigns and their settings, leads added and listed, the
 * do-not-call list. The dialler's claims and outcomes are in `dialling.ts`. Every statement names
 * the owner, so another user's campaign is never read or written.
 */

export interface Schedule {
  timezone: string;
  days: WeekDay[];
  start_time: string;
  end_time: string;
}

/** A campaign's settings as stored: what create fills in and update replaces. */
export interface CampaignSettings {
  name: string;
  assistant_id: number | null;
  schedule: Schedule;
  max_concurrent_calls: number;
  max_attempts: number;
  retry_interval_minutes: number;
  retry_on: RetryOutcome[];
  variables: Record<string, string | number | boolean>;
}

export const campaignRow = z.object({
  id: z.number(),
  name: z.string(),
  assistant_id: z.number().nullable(),
  status: z.enum(CAMPAIGN_STATUSES),
  status_reason: z.string().nullable(),
  schedule: z.object({ timezone: z.string(), days: z.array(z.enum(WEEK_DAYS)), start_time: z.string(), end_time: z.string() }),
  max_concurrent_calls: z.number(),
  max_attempts: z.number(),
  retry_interval_minutes: z.number(),
  retry_on: z.array(z.enum(RETRY_OUTCOMES)),
  variables: z.record(z.union([z.string(), z.number(), z.boolean()])),
  created_at: z.string(),
  updated_at: z.string(),
});
export type CampaignRow = z.infer<typeof campaignRow>;

const campaignColumns = sql.fragment`id, name, assistant_id, status, status_reason, schedule, max_concurrent_calls, max_attempts,
  retry_interval_minutes, retry_on, variables, created_at, updated_at`;

export async function insertCampaign(db: CommonQueryMethods, userId: number, s: CampaignSettings): Promise<CampaignRow> {
  return db.one(sql.type(campaignRow)`
    INSERT INTO campaigns (user_id, name, assistant_id, schedule, max_concurrent_calls, max_attempts, retry_interval_minutes, retry_on, variables)
    VALUES (${userId}, ${s.name}, ${s.assistant_id}, ${sql.jsonb(s.schedule as never)}, ${s.max_concurrent_calls}, ${s.max_attempts},
      ${s.retry_interval_minutes}, ${sql.array(s.retry_on, 'text')}, ${sql.jsonb(s.variables)})
    RETURNING ${campaignColumns}`);
}

/** Writes every setting (the caller merged the stored ones with the request). */
export async function updateCampaign(db: CommonQueryMethods, userId: number, id: number, s: CampaignSettings): Promise<CampaignRow> {
  return db.one(sql.type(campaignRow)`
    UPDATE campaigns SET name = ${s.name}, assistant_id = ${s.assistant_id}, schedule = ${sql.jsonb(s.schedule as never)},
      max_concurrent_calls = ${s.max_concurrent_calls}, max_attempts = ${s.max_attempts}, retry_interval_minutes = ${s.retry_interval_minutes},
      retry_on = ${sql.array(s.retry_on, 'text')}, variables = ${sql.jsonb(s.variables)}, updated_at = now()
    WHERE id = ${id} AND user_id = ${userId}
    RETURNING ${campaignColumns}`);
}

/** With `lock`, the row is locked for the transaction: `update` for a read-modify-write, `share` while leads are added. */
export async function findCampaign(db: CommonQueryMethods, userId: number, id: number, lock?: 'update' | 'share'): Promise<CampaignRow | null> {
  const locking = lock === 'update' ? sql.fragment`FOR UPDATE` : lock === 'share' ? sql.fragment`FOR SHARE` : sql.fragment``;
  return db.maybeOne(sql.type(campaignRow)`SELECT ${campaignColumns} FROM campaigns WHERE id = ${id} AND user_id = ${userId} ${locking}`);
}

export async function listCampaigns(db: CommonQueryMethods, userId: number, status: CampaignStatus | undefined, page: number, perPage: number): Promise<{ items: readonly CampaignRow[]; total: number }> {
  const where = status ? sql.fragment`user_id = ${userId} AND status = ${status}` : sql.fragment`user_id = ${userId}`;
  const [items, total] = await Promise.all([
    db.any(sql.type(campaignRow)`SELECT ${campaignColumns} FROM campaigns WHERE ${where} ORDER BY id DESC LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`),
    db.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM campaigns WHERE ${where}`),
  ]);
  return { items, total };
}

export const campaignStats = z.object({
  total: z.number(),
  pending: z.number(),
  calling: z.number(),
  completed: z.number(),
  failed: z.number(),
  no_answer: z.number(),
  busy: z.number(),
  voicemail: z.number(),
  cancelled: z.number(),
  do_not_call: z.number(),
  attempts: z.number(),
});
export type CampaignStats = z.infer<typeof campaignStats>;

export const NO_LEADS: CampaignStats = { total: 0, pending: 0, calling: 0, completed: 0, failed: 0, no_answer: 0, busy: 0, voicemail: 0, cancelled: 0, do_not_call: 0, attempts: 0 };

/** The lead counts of several campaigns in one grouped scan; campaigns without leads are absent. */
export async function statsOf(db: CommonQueryMethods, userId: number, campaignIds: readonly number[]): Promise<Map<number, CampaignStats>> {
  if (campaignIds.length === 0) return new Map();
  const rows = await db.any(sql.type(campaignStats.extend({ campaign_id: z.number() }))`
    SELECT campaign_id,
      count(*)::int AS total,
      count(*) FILTER (WHERE status IN ('pending', 'retrying'))::int AS pending,
      count(*) FILTER (WHERE status = 'calling')::int AS calling,
      count(*) FILTER (WHERE status = 'completed')::int AS completed,
      count(*) FILTER (WHERE status = 'failed')::int AS failed,
      count(*) FILTER (WHERE status = 'no-answer')::int AS no_answer,
      count(*) FILTER (WHERE status = 'busy')::int AS busy,
      count(*) FILTER (WHERE status = 'voicemail')::int AS voicemail,
      count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled,
      count(*) FILTER (WHERE status = 'do-not-call')::int AS do_not_call,
      coalesce(sum(attempts), 0)::int AS attempts
    FROM campaign_leads
    WHERE user_id = ${userId} AND campaign_id = ANY(${sql.array([...campaignIds], 'int8')})
    GROUP BY campaign_id`);
  return new Map(rows.map(({ campaign_id, ...stats }) => [campaign_id, stats]));
}

/**
 * Moves a campaign from one of `from` to `to`, clearing its status_reason; false when it is in
 * none of them (or is not the user's).
 */
export async function moveCampaign(db: CommonQueryMethods, userId: number, id: number, from: readonly CampaignStatus[], to: CampaignStatus): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    UPDATE campaigns SET status = ${to}, status_reason = NULL, updated_at = now()
    WHERE id = ${id} AND user_id = ${userId} AND status = ANY(${sql.array([...from], 'text')})`);
  return result.rowCount > 0;
}

/** A cancelled campaign's leads that were still to be called. */
export async function cancelLeads(db: CommonQueryMethods, userId: number, campaignId: number): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE campaign_leads SET status = 'cancelled', updated_at = now()
    WHERE campaign_id = ${campaignId} AND user_id = ${userId} AND status IN ('pending', 'retrying')`);
}

export async function hasLeadToCall(db: CommonQueryMethods, userId: number, campaignId: number): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM campaign_leads WHERE campaign_id = ${campaignId} AND user_id = ${userId} AND status IN ('pending', 'retrying')`);
}

/** Deletes a campaign that is not running: `deleted`, `running` (kept), or `missing`. */
export async function deleteCampaign(db: CommonQueryMethods, userId: number, id: number): Promise<'deleted' | 'running' | 'missing'> {
  const deleted = await db.query(sql.unsafe`DELETE FROM campaigns WHERE id = ${id} AND user_id = ${userId} AND status <> 'running'`);
  if (deleted.rowCount > 0) return 'deleted';
  return (await findCampaign(db, userId, id)) ? 'running' : 'missing';
}

/**
 * The assistant a campaign dials with, locked (`FOR SHARE`) until the transaction ends, so it
 * cannot be deleted between this check and the campaign's move (its deletion pauses running campaigns).
 */
export async function campaignAssistant(db: CommonQueryMethods, userId: number, assistantId: number) {
  return db.maybeOne(sql.type(z.object({ type: z.enum(['inbound', 'outbound']), timezone: z.string(), phone_number_id: z.number().nullable(), usable: z.boolean().nullable() }))`
    SELECT a.type, a.timezone, a.phone_number_id, (p.paid_until IS NULL OR p.has_active_subscription) AS usable
    FROM assistants a LEFT JOIN phone_numbers p ON p.id = a.phone_number_id
    WHERE a.id = ${assistantId} AND a.user_id = ${userId}
    FOR SHARE OF a`);
}

/**
 * Pauses the running campaigns of an assistant that is being deleted, in its deletion's
 * transaction. Every campaign of the assistant is locked first, as a move locks its campaign
 * before the assistant, so a start racing the deletion either sees the assistant gone or is paused.
 */
export async function pauseCampaignsOfAssistant(db: CommonQueryMethods, userId: number, assistantId: number): Promise<number> {
  const result = await db.query(sql.unsafe`
    WITH locked AS (SELECT id FROM campaigns WHERE assistant_id = ${assistantId} AND user_id = ${userId} FOR UPDATE)
    UPDATE campaigns SET status = 'paused', status_reason = 'assistant_deleted', updated_at = now()
    WHERE id IN (SELECT id FROM locked) AND status = 'running'`);
  return result.rowCount;
}

/**
 * Adds leads (numbers already valid and unique among themselves; variables as JSON text). A
 * number the campaign has is skipped; one on the owner's do-not-call list is added as `do-not-call`.
 */
export async function insertLeads(db: CommonQueryMethods, userId: number, campaignId: number, phones: readonly string[], variables: readonly string[]): Promise<{ added: number; do_not_call: number }> {
  return db.one(sql.type(z.object({ added: z.number(), do_not_call: z.number() }))`
    WITH added AS (
      INSERT INTO campaign_leads (campaign_id, user_id, phone_number, variables, status)
      SELECT ${campaignId}, ${userId}, l.phone_number, l.variables::jsonb, CASE WHEN d.phone_number IS NULL THEN 'pending' ELSE 'do-not-call' END
      FROM ${sql.unnest(phones.map((phone, index) => [phone, variables[index]!]), ['text', 'text'])} WITH ORDINALITY AS l(phone_number, variables, n)
      LEFT JOIN do_not_call d ON d.user_id = ${userId} AND d.phone_number = l.phone_number
      ORDER BY l.n
      ON CONFLICT (campaign_id, phone_number) DO NOTHING
      RETURNING status)
    SELECT count(*)::int AS added, count(*) FILTER (WHERE status = 'do-not-call')::int AS do_not_call FROM added`);
}

export const leadRow = z.object({
  id: z.number(),
  phone_number: z.string(),
  variables: z.record(z.unknown()),
  status: z.enum(LEAD_STATUSES),
  attempts: z.number(),
  last_call_id: z.number().nullable(),
  next_attempt_at: z.string().nullable(),
  updated_at: z.string(),
});
export type LeadRow = z.infer<typeof leadRow>;

export async function listLeads(db: CommonQueryMethods, userId: number, campaignId: number, status: LeadStatus | undefined, page: number, perPage: number): Promise<{ items: readonly LeadRow[]; total: number }> {
  const conditions = [sql.fragment`campaign_id = ${campaignId}`, sql.fragment`user_id = ${userId}`];
  if (status) conditions.push(sql.fragment`status = ${status}`);
  const where = sql.join(conditions, sql.fragment` AND `);
  const [items, total] = await Promise.all([
    db.any(sql.type(leadRow)`
      SELECT id, phone_number, variables, status, attempts, last_call_id,
        CASE WHEN status IN ('pending', 'retrying') THEN next_attempt_at END AS next_attempt_at, updated_at
      FROM campaign_leads WHERE ${where} ORDER BY id LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`),
    db.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM campaign_leads WHERE ${where}`),
  ]);
  return { items, total };
}

export const doNotCallRow = z.object({ phone_number: z.string(), created_at: z.string() });
export type DoNotCallRow = z.infer<typeof doNotCallRow>;

/** Puts a number on the list (kept as it was when already there) and marks the owner's leads with it that were still to be called. */
export async function addDoNotCall(db: CommonQueryMethods, userId: number, phone: string): Promise<{ entry: DoNotCallRow; created: boolean; leads: number }> {
  const inserted = await db.maybeOne(sql.type(doNotCallRow)`
    INSERT INTO do_not_call (user_id, phone_number) VALUES (${userId}, ${phone})
    ON CONFLICT (user_id, phone_number) DO NOTHING
    RETURNING phone_number, created_at`);
  const entry = inserted ?? (await db.one(sql.type(doNotCallRow)`SELECT phone_number, created_at FROM do_not_call WHERE user_id = ${userId} AND phone_number = ${phone}`));
  const marked = await db.query(sql.unsafe`
    UPDATE campaign_leads SET status = 'do-not-call', updated_at = now()
    WHERE user_id = ${userId} AND phone_number = ${phone} AND status IN ('pending', 'retrying')`);
  return { entry, created: inserted !== null, leads: marked.rowCount };
}

export async function listDoNotCall(db: CommonQueryMethods, userId: number, page: number, perPage: number): Promise<{ items: readonly DoNotCallRow[]; total: number }> {
  const [items, total] = await Promise.all([
    db.any(sql.type(doNotCallRow)`
      SELECT phone_number, created_at FROM do_not_call WHERE user_id = ${userId}
      ORDER BY created_at DESC, phone_number LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`),
    db.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM do_not_call WHERE user_id = ${userId}`),
  ]);
  return { items, total };
}

export async function removeDoNotCall(db: CommonQueryMethods, userId: number, phone: string): Promise<boolean> {
  const result = await db.query(sql.unsafe`DELETE FROM do_not_call WHERE user_id = ${userId} AND phone_number = ${phone}`);
  return result.rowCount > 0;
}
