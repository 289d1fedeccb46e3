import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { storableJson } from '../store/text.js';
import type { CallEventRecord } from './events.js';

/** Channel on which a call's owner asks the process holding it to act (payload: the call id). */
export const CALL_COMMANDS_CHANNEL = 'call_commands';

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

/** Asks the process holding a live call to hang it up (a row it takes, and a notification to make it prompt). */
export async function requestHangUp(db: CommonQueryMethods, callId: number): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO call_commands (call_id, command) VALUES (${callId}, 'hangup')
    ON CONFLICT (call_id) DO UPDATE SET requested_at = now()
    RETURNING pg_notify(${CALL_COMMANDS_CHANNEL}, call_id::text)`);
}

/** Takes the requests waiting for any of `callIds` (the calls this process holds). */
export async function takeCallCommands(db: CommonQueryMethods, callIds: readonly number[]): Promise<ReadonlyArray<{ call_id: number; command: string }>> {
  if (callIds.length === 0) return [];
  return db.any(sql.type(z.object({ call_id: z.number(), command: z.string() }))`
    DELETE FROM call_commands WHERE call_id = ANY(${sql.array([...callIds], 'int8')}) RETURNING call_id, command`);
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
