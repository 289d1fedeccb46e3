import { sql, type CommonQueryMethods, type DatabaseTransactionConnection } from 'slonik';
import { z } from 'zod';
import { CALL_STATUSES, type CallStatus } from '../../schemas/calls.js';
import { insertLedgerEntry } from '../ledger/repository.js';
import { storableJson, storableText } from '../store/text.js';
import type { CallEventRecord } from './events.js';


export const callRow = z.object({
  id: z.number(),
  user_id: z.number(),
  assistant_id: z.number().nullable(),
  assistant_name: z.string(),
  campaign_id: z.number().nullable(),
  campaign_name: z.string().nullable(),
  type: z.enum(['inbound', 'outbound', 'web']),
  duration: z.number(),
  assistant_phone_number: z.string().nullable(),
  client_phone_number: z.string().nullable(),
  status: z.enum(CALL_STATUSES),
  transcript: z.string(),
  variables: z.record(z.unknown()),
  evaluation: z.record(z.unknown()).nullable(),
  webhook_response: z.record(z.unknown()).nullable(),
  carrier_cost: z.number(),
  total_cost: z.number(),
  answered_by: z.enum(['human', 'machine', 'unknown']).nullable(),
  recording_path: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type CallRow = z.infer<typeof callRow>;

const callSelect = sql.fragment`
  SELECT c.id, c.user_id, c.assistant_id, c.assistant_name, c.campaign_id, g.name AS campaign_name, c.type, c.duration,
    c.assistant_phone_number, c.client_phone_number, c.status, c.transcript, c.variables, c.evaluation, c.webhook_response,
    c.carrier_cost, c.total_cost, c.answered_by, c.recording_path, c.created_at, c.updated_at
  FROM calls c LEFT JOIN campaigns g ON g.id = c.campaign_id`;

export interface CallFilters {
  readonly status?: CallStatus;
  readonly type?: 'inbound' | 'outbound' | 'web';
  readonly phoneNumber?: string;
  readonly assistantId?: number;
  readonly campaignId?: number;
  /** Inclusive UTC days. */
  readonly dateFrom?: string;
  readonly dateTo?: string;
}

export async function findCall(db: CommonQueryMethods, userId: number, id: number): Promise<CallRow | null> {
  return db.maybeOne(sql.type(callRow)`${callSelect} WHERE c.id = ${id} AND c.user_id = ${userId}`);
}

export async function listCalls(db: CommonQueryMethods, userId: number, filters: CallFilters, page: number, perPage: number): Promise<{ items: readonly CallRow[]; total: number }> {
  const conditions = [sql.fragment`c.user_id = ${userId}`];
  if (filters.status) conditions.push(sql.fragment`c.status = ${filters.status}`);
  if (filters.type) conditions.push(sql.fragment`c.type = ${filters.type}`);
  if (filters.phoneNumber) conditions.push(sql.fragment`c.client_phone_number = ${filters.phoneNumber}`);
  if (filters.assistantId !== undefined) conditions.push(sql.fragment`c.assistant_id = ${filters.assistantId}`);
  if (filters.campaignId !== undefined) conditions.push(sql.fragment`c.campaign_id = ${filters.campaignId}`);
  if (filters.dateFrom) conditions.push(sql.fragment`c.created_at >= (${filters.dateFrom}::date)::timestamp AT TIME ZONE 'UTC'`);
  if (filters.dateTo) conditions.push(sql.fragment`c.created_at < ((${filters.dateTo}::date + 1)::timestamp AT TIME ZONE 'UTC')`);
  const where = sql.join(conditions, sql.fragment` AND `);
  const [items, total] = await Promise.all([
    db.any(sql.type(callRow)`${callSelect} WHERE ${where} ORDER BY c.created_at DESC, c.id DESC LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`),
    db.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM calls c WHERE ${where}`),
  ]);
  return { items, total };
}

export async function campaignOwned(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM campaigns WHERE id = ${id} AND user_id = ${userId}`);
}

export interface NewCall {
  readonly userId: number;
  readonly assistantId: number;
  readonly assistantName: string;
  readonly type: 'inbound' | 'outbound' | 'web';
  readonly mode: 'pipeline' | 'multimodal' | 'dualplex';
  readonly status: 'initiated' | 'ringing';
  readonly assistantPhoneNumber: string | null;
  readonly clientPhoneNumber: string | null;
  readonly variables: Record<string, unknown>;
  readonly carrierCallId: string | null;
  /** The carrier its number records (null for a web call). */
  readonly carrierName: string | null;
  /** The process creating it, which holds it until its media stream joins. */
  readonly holder: string;
  /** The SHA-256 of its media stream's one-time token, and when the token expires (ISO). */
  readonly streamTokenHash: Buffer;
  readonly streamExpiresAt: string;
  /** Its start by the calls' clock (ISO): the `start` event's time. */
  readonly startedAt: string;
  /** The campaign, lead and attempt it dials, for a campaign's call. */
  readonly campaign?: { readonly campaignId: number; readonly leadId: number; readonly attempt: number };
}

/**
 * Creates a call and its first event (`start`, seq 0, in the same statement): the process that
 * takes its media stream over may be another one, and the call's story begins here either way.
 */
export async function insertCall(db: CommonQueryMethods, call: NewCall): Promise<number> {
  return db.oneFirst(sql.type(z.object({ id: z.number() }))`
    WITH created AS (
      INSERT INTO calls (user_id, assistant_id, assistant_name, type, mode, status, assistant_phone_number, client_phone_number, variables, carrier_call_id,
        carrier_name, holder, stream_token_hashes, stream_expires_at, campaign_id, campaign_lead_id, campaign_attempt)
      VALUES (${call.userId}, ${call.assistantId}, ${call.assistantName}, ${call.type}, ${call.mode}, ${call.status}, ${call.assistantPhoneNumber},
        ${call.clientPhoneNumber}, ${sql.jsonb(call.variables as never)}, ${call.carrierCallId}, ${call.carrierName}, ${call.holder},
        ARRAY[${sql.binary(call.streamTokenHash)}::bytea], ${call.streamExpiresAt}::timestamptz,
        ${call.campaign?.campaignId ?? null}, ${call.campaign?.leadId ?? null}, ${call.campaign?.attempt ?? null})
      RETURNING id, created_at)
    , started AS (
      INSERT INTO call_events (call_id, seq, type, at, offset_ms, data)
      SELECT id, 0, 'start', ${call.startedAt}::timestamptz, 0, jsonb_build_object('type', ${call.type}::text, 'mode', ${call.mode}::text) FROM created)
    SELECT id FROM created`);
}

/**
 * Moves a call that has not ended to `status`, if `holder` still holds it; the answer time is kept
 * on the way into `in-progress`.
 */
export async function updateCallStatus(db: CommonQueryMethods, id: number, holder: string, status: CallStatus, at: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE calls SET status = ${status}, updated_at = now(),
      answered_at = CASE WHEN ${status} = 'in-progress' AND answered_at IS NULL THEN ${at}::timestamptz ELSE answered_at END
    WHERE id = ${id} AND ended_at IS NULL AND holder = ${holder}`);
}

export async function setCarrierCallId(db: CommonQueryMethods, id: number, carrierCallId: string): Promise<void> {
  await db.query(sql.unsafe`UPDATE calls SET carrier_call_id = ${carrierCallId}, updated_at = now() WHERE id = ${id}`);
}

export interface CallEnding {
  readonly status: CallStatus;
  readonly transcript: string;
  readonly duration: number;
  readonly answeredBy: 'human' | 'machine' | 'unknown' | null;
  readonly answeredAt: string | null;
  readonly endedAt: string;
  readonly carrierCost: number;
  readonly totalCost: number;
  /** Relative to the recordings directory. */
  readonly recordingPath: string | null;
  /** The post-call evaluation is still to run. */
  readonly evaluationPending: boolean;
}

/**
 * Writes the end of a call once, by its holder (its heartbeat goes with it); false when it had
 * already ended or another process has taken it over. The heartbeat row is taken first, as a sweep takes it (`closeOrphanedCall`): an end and a sweep
 * of the same call then wait for each other at that row instead of each holding the row the other
 * needs.
 */
export async function endCall(db: CommonQueryMethods, id: number, holder: string, end: CallEnding): Promise<boolean> {
  await forgetHeartbeat(db, id);
  const result = await db.query(sql.unsafe`
    UPDATE calls SET status = ${end.status}, transcript = ${storableText(end.transcript)}, duration = ${end.duration}, answered_by = ${end.answeredBy},
      carrier_cost = ${end.carrierCost.toFixed(6)}, total_cost = ${end.totalCost.toFixed(6)}, recording_path = ${end.recordingPath},
      evaluation_status = ${end.evaluationPending ? 'pending' : null},
      answered_at = COALESCE(answered_at, ${end.answeredAt}::timestamptz), ended_at = ${end.endedAt}::timestamptz, updated_at = now()
    WHERE id = ${id} AND ended_at IS NULL AND holder = ${holder}`);
  return result.rowCount > 0;
}

/** What a live process says of one of its calls at each heartbeat. */
export interface CallHeartbeat {
  readonly id: number;
  /** When the call's audio last went either way (ISO), by the process's clock; null before any. */
  readonly heardAt: string | null;
  /** The transcript so far, when it changed since the last beat written; else null (kept as it was). */
  readonly transcript: string | null;
}

/**
 * A live process (`holder`) vouches for its calls (`seen_at` moves, so no sweep takes them for
 * orphans) and records when each was last heard, which is what a sweep charges up to if the
 * process stops.
 * @returns the calls vouched for: one missing has ended in the database (another process's sweep
 *   took it while this one could not vouch for it), or another process has taken it over.
 * Rows are written in call id order, whatever the order of `beats`: two beats at once (of two
 * processes, or one held up by the ends being saved) then wait for each other, never each holding
 * a row the other needs. (Unsorted, the order would be the plan's: the list's, the open calls' by
 * last change, or the table's on disk, and it changes as calls are answered and end.)
 */
export async function touchCalls(db: CommonQueryMethods, holder: string, beats: readonly CallHeartbeat[]): Promise<readonly number[]> {
  if (beats.length === 0) return [];
  return db.anyFirst(sql.type(z.object({ call_id: z.number() }))`
    INSERT INTO call_heartbeats (call_id, seen_at, heard_at, transcript)
    SELECT b.id, now(), b.heard_at, b.transcript
    FROM ${sql.unnest(beats.map((b) => [b.id, b.heardAt, b.transcript === null ? null : storableText(b.transcript)]), ['int8', 'timestamptz', 'text'])} AS b(id, heard_at, transcript)
    JOIN calls c ON c.id = b.id AND c.ended_at IS NULL AND c.holder = ${holder}
    ORDER BY b.id
    ON CONFLICT (call_id) DO UPDATE SET seen_at = excluded.seen_at, heard_at = COALESCE(excluded.heard_at, call_heartbeats.heard_at),
      transcript = COALESCE(excluded.transcript, call_heartbeats.transcript)
    RETURNING call_id`);
}

const orphanRow = z.object({
  id: z.number(),
  user_id: z.number(),
  type: z.enum(['inbound', 'outbound', 'web']),
  mode: z.enum(['pipeline', 'multimodal', 'dualplex']),
  assistant_phone_number: z.string().nullable(),
  answered_ms: z.number().nullable(),
  /** When the call was last heard, else last vouched for: what it is charged up to. */
  end_ms: z.number(),
  last_seen: z.string(),
});
export type OrphanedCall = z.infer<typeof orphanRow>;

/** When a process last vouched for an open call: its heartbeat, or its row's last change (a call that never had a heartbeat). */
const lastSeen = sql.fragment`GREATEST(c.updated_at, h.seen_at)`;

/**
 * Calls without an end that no process has vouched for in `silentSeconds` (a stopped process
 * left them), other than `except` (this process's own).
 */
export async function orphanedCalls(db: CommonQueryMethods, silentSeconds: number, except: readonly number[]): Promise<readonly OrphanedCall[]> {
  return db.any(sql.type(orphanRow)`
    SELECT c.id, c.user_id, c.type, c.mode, c.assistant_phone_number,
      (extract(epoch FROM c.answered_at) * 1000)::float8 AS answered_ms,
      (extract(epoch FROM LEAST(COALESCE(h.heard_at, ${lastSeen}), ${lastSeen})) * 1000)::float8 AS end_ms,
      ${lastSeen}::text AS last_seen
    FROM calls c LEFT JOIN call_heartbeats h ON h.call_id = c.id
    WHERE c.ended_at IS NULL AND ${lastSeen} < now() - make_interval(secs => ${silentSeconds}) AND NOT (c.id = ANY(${sql.array([...except], 'int8')}))
    ORDER BY ${lastSeen} LIMIT 100`);
}

/**
 * Ends an orphaned call as of when it was last heard (else last seen alive): `ended` with its
 * duration, costs and what its recording kept when it was answered, else `failed`; false when it
 * ended or was touched meanwhile. `recordingPath` is relative to the recordings directory.
 */
export async function closeOrphanedCall(db: DatabaseTransactionConnection, call: OrphanedCall, costs: { seconds: number; carrier: number; total: number }, recordingPath: string | null): Promise<boolean> {
  // The heartbeat row first: a heartbeat committed before this lock is seen by the check below (a
  // statement of its own), and one after it waits for this transaction and then finds the call ended.
  await db.query(sql.unsafe`SELECT 1 FROM call_heartbeats WHERE call_id = ${call.id} FOR UPDATE`);
  const result = await db.query(sql.unsafe`
    UPDATE calls c SET status = CASE WHEN c.answered_at IS NULL THEN 'failed' ELSE 'ended' END, duration = ${costs.seconds},
      carrier_cost = ${costs.carrier.toFixed(6)}, total_cost = ${costs.total.toFixed(6)}, recording_path = COALESCE(c.recording_path, ${recordingPath}),
      transcript = COALESCE(still.transcript, c.transcript), ended_at = to_timestamp(${call.end_ms / 1000}), updated_at = now()
    FROM (SELECT c.id, h.transcript FROM calls c LEFT JOIN call_heartbeats h ON h.call_id = c.id
          WHERE c.id = ${call.id} AND c.ended_at IS NULL AND ${lastSeen} = ${call.last_seen}::timestamptz FOR UPDATE OF c) AS still
    WHERE c.id = still.id`);
  if (result.rowCount === 0) return false;
  await forgetHeartbeat(db, call.id);
  return true;
}

/**
 * An ended call needs no heartbeat, and a request to it (a hang-up) is moot: their rows go in the
 * transaction that writes the end.
 */
export async function forgetHeartbeat(db: CommonQueryMethods, callId: number): Promise<void> {
  // The heartbeat's row first: ends and sweeps of one call meet there (see `endCall`).
  await db.query(sql.unsafe`DELETE FROM call_heartbeats WHERE call_id = ${callId}`);
  await db.query(sql.unsafe`DELETE FROM call_commands WHERE call_id = ${callId}`);
}

/** The type and country of a platform number, for its carrier price. */
export async function numberTariff(db: CommonQueryMethods, userId: number, number: string): Promise<{ type: 'normal' | 'sip' | 'caller_id'; country: string } | null> {
  const row = await db.maybeOne(sql.type(z.object({ type: z.enum(['normal', 'sip', 'caller_id']), country_code: z.string() }))`
    SELECT type, country_code FROM phone_numbers WHERE user_id = ${userId} AND phone_number = ${number} LIMIT 1`);
  return row ? { type: row.type, country: row.country_code } : null;
}

/**
 * Charges a call once (ledger kind `call`, reference the call id) inside the transaction that
 * ends it. A call is cut off before its cost passes the balance, so the charge normally fits;
 * if calls running at once took the balance first, the rest of the cost is not charged (the
 * ended call is never lost for it), and the shortfall is returned.
 */
export async function chargeCall(db: CommonQueryMethods, userId: number, callId: number, total: number): Promise<number> {
  if (total <= 0) return 0;
  const balance = await db.oneFirst(sql.type(z.object({ balance: z.number() }))`SELECT balance FROM users WHERE id = ${userId} FOR UPDATE`);
  const charged = Math.min(total, Math.max(0, balance));
  // No ON CONFLICT here: the balance moves in a BEFORE INSERT trigger, ahead of the conflict check,
  // so a skipped duplicate would still debit. `endCall` lets a call end once; a second charge would
  // violate the unique reference and roll its transaction back.
  if (charged > 0) await insertLedgerEntry(db, { userId, amount: -charged, kind: 'call', reason: `Call ${callId}`, reference: String(callId) });
  return Math.round((total - charged) * 1e6) / 1e6;
}

export async function recordingPathOf(db: CommonQueryMethods, callId: number): Promise<string | null> {
  return db.maybeOneFirst(sql.type(z.object({ recording_path: z.string().nullable() }))`SELECT recording_path FROM calls WHERE id = ${callId}`).then((p) => p ?? null);
}

/** Calls of a user by id, in the order of `ids`. */
export async function findCallsByIds(db: CommonQueryMethods, userId: number, ids: readonly number[]): Promise<CallRow[]> {
  if (ids.length === 0) return [];
  const rows = await db.any(sql.type(callRow)`${callSelect} WHERE c.user_id = ${userId} AND c.id = ANY(${sql.array(ids, 'int8')})`);
  const byId = new Map(rows.map((row) => [row.id, row]));
  return ids.map((id) => byId.get(id)).filter((row): row is CallRow => row !== undefined);
}

export const indexedCallRow = z.object({
  id: z.number(),
  user_id: z.number(),
  assistant_id: z.number().nullable(),
  campaign_id: z.number().nullable(),
  status: z.string(),
  type: z.string(),
  client_phone_number: z.string().nullable(),
  created_at: z.string(),
  transcript: z.string(),
});

export async function callForIndex(db: CommonQueryMethods, id: number) {
  return db.maybeOne(sql.type(indexedCallRow)`
    SELECT id, user_id, assistant_id, campaign_id, status, type, client_phone_number, created_at, transcript FROM calls WHERE id = ${id}`);
}

const webhookCallRow = z.object({
  id: z.number(),
  user_id: z.number(),
  assistant_id: z.number().nullable(),
  campaign_id: z.number().nullable(),
  campaign_lead_id: z.number().nullable(),
  status: z.string(),
  duration: z.number(),
  client_phone_number: z.string().nullable(),
  assistant_phone_number: z.string().nullable(),
  answered_by: z.string().nullable(),
  answered_at: z.string().nullable(),
  variables: z.record(z.unknown()),
  evaluation: z.record(z.unknown()).nullable(),
  transcript: z.string(),
  created_at: z.string(),
  ended_at: z.string().nullable(),
  is_webhook_active: z.boolean().nullable(),
  webhook_url: z.string().nullable(),
  send_webhook_only_on_completed: z.boolean().nullable(),
  include_recording_in_webhook: z.boolean().nullable(),
  input_variables: z.record(z.unknown()).nullable(),
});
export type WebhookCall = z.infer<typeof webhookCallRow>;

/** A call as its `call.ended` webhook tells it, with its assistant's webhook settings (null when the assistant is gone). */
export async function callForWebhook(db: CommonQueryMethods, callId: number): Promise<WebhookCall | null> {
  return db.maybeOne(sql.type(webhookCallRow)`
    SELECT c.id, c.user_id, c.assistant_id, c.campaign_id, c.campaign_lead_id, c.status, c.duration, c.client_phone_number, c.assistant_phone_number, c.answered_by,
      c.answered_at, c.variables, c.evaluation, c.transcript, c.created_at, c.ended_at,
      a.is_webhook_active, a.webhook_url, a.send_webhook_only_on_completed, a.include_recording_in_webhook, a.variables AS input_variables
    FROM calls c LEFT JOIN assistants a ON a.id = c.assistant_id WHERE c.id = ${callId}`);
}

/** The last webhook attempt's outcome on its call: `{status, body}`, or `{status: null, error}` when no answer came. */
export async function saveWebhookResponse(db: CommonQueryMethods, callId: number, webhookResponse: Record<string, unknown>): Promise<void> {
  await db.query(sql.unsafe`UPDATE calls SET webhook_response = ${sql.jsonb(webhookResponse as never)}, updated_at = now() WHERE id = ${callId}`);
}

const evaluationSubjectRow = z.object({
  transcript: z.string(),
  mode: z.enum(['pipeline', 'multimodal', 'dualplex']),
  llm_model_id: z.number().nullable(),
  chat_llm_fallback_id: z.number().nullable(),
  post_call_schema: z.array(z.object({ name: z.string(), type: z.enum(['string', 'number', 'bool']), description: z.string() })).nullable(),
});
export type EvaluationSubject = z.infer<typeof evaluationSubjectRow>;

/** What a pending post-call evaluation reads: the transcript and its assistant's models and schema; null when none is pending. */
export async function evaluationSubject(db: CommonQueryMethods, callId: number): Promise<EvaluationSubject | null> {
  return db.maybeOne(sql.type(evaluationSubjectRow)`
        SELECT c.transcript, c.mode, a.llm_model_id, a.chat_llm_fallback_id, a.post_call_schema
        FROM calls c LEFT JOIN assistants a ON a.id = c.assistant_id WHERE c.id = ${callId} AND c.evaluation_status = 'pending'`);
}

/**
 * A pending evaluation is held by a claim (an id of its own) with a lease in database time. Only
 * the holder saves a result, so an evaluation taken over after its lease ran out (its process
 * stalled, or stopped) is written once, by whichever run holds it then.
 */
const evaluationClaimRow = z.object({ id: z.number(), claim: z.string() });
export type EvaluationClaim = z.infer<typeof evaluationClaimRow>;

/** Unheld: never claimed, released, or its lease ran out. */
const evaluationUnheld = sql.fragment`evaluation_status = 'pending' AND (evaluation_lease_expires_at IS NULL OR evaluation_lease_expires_at < now())`;

/** Claims `callId`'s pending evaluation for `leaseMs`; null when it is not pending or another claim holds it. */
export async function claimEvaluation(db: CommonQueryMethods, callId: number, leaseMs: number): Promise<EvaluationClaim | null> {
  return db.maybeOne(sql.type(evaluationClaimRow)`
    UPDATE calls SET evaluation_claim = gen_random_uuid(), evaluation_lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
    WHERE id = ${callId} AND ${evaluationUnheld}
    RETURNING id, evaluation_claim::text AS claim`);
}

/** Claims the oldest pending evaluation that no claim holds, for `leaseMs`; null when there is none. */
export async function claimNextEvaluation(db: CommonQueryMethods, leaseMs: number): Promise<EvaluationClaim | null> {
  return db.maybeOne(sql.type(evaluationClaimRow)`
    UPDATE calls c SET evaluation_claim = gen_random_uuid(), evaluation_lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
    FROM (SELECT id FROM calls WHERE ${evaluationUnheld} ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) AS next
    WHERE c.id = next.id
    RETURNING c.id, c.evaluation_claim::text AS claim`);
}

const heldEvaluation = (held: EvaluationClaim) => sql.fragment`id = ${held.id} AND evaluation_status = 'pending' AND evaluation_claim = ${held.claim}::uuid`;

/** Extends the lease of an evaluation still held by `held`; false when it is not (taken over, or settled). */
export async function renewEvaluationLease(db: CommonQueryMethods, held: EvaluationClaim, leaseMs: number): Promise<boolean> {
  const renewed = await db.query(sql.unsafe`UPDATE calls SET evaluation_lease_expires_at = now() + ${leaseMs} * interval '1 millisecond' WHERE ${heldEvaluation(held)}`);
  return renewed.rowCount > 0;
}

/** Gives a held evaluation back (at a stop): any process takes it up at once. */
export async function releaseEvaluation(db: CommonQueryMethods, held: EvaluationClaim): Promise<void> {
  await db.query(sql.unsafe`UPDATE calls SET evaluation_claim = NULL, evaluation_lease_expires_at = NULL WHERE ${heldEvaluation(held)}`);
}

/**
 * Stores a call's evaluation (`done`, or `failed` when `ok` is false) while `held` holds it: false
 * when it does not any more (another process took it over, and saves its own).
 */
export async function saveEvaluation(db: CommonQueryMethods, held: EvaluationClaim, evaluation: Record<string, unknown>, ok: boolean): Promise<boolean> {
  const saved = await db.query(sql.unsafe`
    UPDATE calls SET evaluation = ${sql.jsonb(storableJson(evaluation) as never)}, evaluation_status = ${ok ? 'done' : 'failed'},
      evaluation_lease_expires_at = NULL, updated_at = now()
    WHERE ${heldEvaluation(held)}`);
  return saved.rowCount > 0;
}

// ---------------------------------------------------------------- call events and requests to live calls

/**
 * Writes call events; one already written (same call and `seq`: a heartbeat's batch and the end's
 * racing) is kept as it was.
 */
export async function insertCallEvents(db: CommonQueryMethods, events: readonly CallEventRecord[]): Promise<void> {
  if (events.length === 0) return;
  await db.query(sql.unsafe`
    INSERT INTO call_events (call_id, seq, type, at, offset_ms, data)
    SELECT e.call_id, e.seq, e.type, e.at, e.offset_ms, e.data
    FROM ${sql.unnest(
      events.map((e) => [e.callId, e.seq, e.type, e.at, e.offsetMs, JSON.stringify(storableJson(e.data))]),
      ['int8', 'int4', 'text', 'timestamptz', 'int4', 'jsonb'],
    )} AS e(call_id, seq, type, at, offset_ms, data)
    ON CONFLICT (call_id, seq) DO NOTHING`);
}

const eventRow = z.object({ type: z.string(), at: z.string(), offset_ms: z.number(), data: z.record(z.unknown()) });
export type CallEventRow = z.infer<typeof eventRow>;

/** A page of a call's events in the order they happened; the caller has checked the call is the user's. */
export async function listCallEvents(db: CommonQueryMethods, callId: number, page: number, perPage: number): Promise<{ items: readonly CallEventRow[]; total: number }> {
  const [items, total] = await Promise.all([
    db.any(sql.type(eventRow)`
      SELECT type, at::text AS at, offset_ms, data FROM call_events WHERE call_id = ${callId}
      ORDER BY seq LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`),
    db.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM call_events WHERE call_id = ${callId}`),
  ]);
  return { items, total };
}

/**
 * The `end` event of a call a sweep settled (its process was lost): after the events that process
 * wrote, as of the call's end. Runs in the sweep's transaction, after the call's row was ended.
 */
export async function insertOrphanEndEvent(db: CommonQueryMethods, callId: number): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO call_events (call_id, seq, type, at, offset_ms, data)
    SELECT c.id, COALESCE((SELECT max(seq) + 1 FROM call_events WHERE call_id = c.id), 0), 'end', c.ended_at,
      GREATEST(0, round(extract(epoch FROM c.ended_at - c.created_at) * 1000))::int,
      jsonb_build_object('status', c.status, 'duration', c.duration, 'reason', 'orphaned')
    FROM calls c WHERE c.id = ${callId}
    ON CONFLICT (call_id, seq) DO NOTHING`);
}

/** Whether the call has ended in the database (its end saved, by any process). */
export async function callEnded(db: CommonQueryMethods, callId: number): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM calls WHERE id = ${callId} AND ended_at IS NOT NULL`);
}

const liveFactsRow = z.object({ answered_ms: z.number().nullable(), beat_transcript: z.string().nullable() });

/** A live call's answer time (ms) and the transcript its process last wrote with a heartbeat. */
export async function liveCallFacts(db: CommonQueryMethods, callId: number): Promise<z.infer<typeof liveFactsRow> | null> {
  return db.maybeOne(sql.type(liveFactsRow)`
    SELECT (extract(epoch FROM c.answered_at) * 1000)::float8 AS answered_ms, h.transcript AS beat_transcript
    FROM calls c LEFT JOIN call_heartbeats h ON h.call_id = c.id WHERE c.id = ${callId} AND c.ended_at IS NULL`);
}
