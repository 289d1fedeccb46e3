import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * Which process holds a live call, as PostgreSQL records it (`calls.holder`), the one-time
 * tokens by which a media stream joins its call on whichever process accepts it, and the
 * requests other processes make of the holder (`call_commands`). The process
 * that created a call holds it until its stream joins; the process that accepts the stream takes
 * it over with the token (`claimStream`), and the one before learns it has let the call go
 * (`handedOver`). Only the holder writes the call's status and end (see `repository.ts`).
 */

const claimedRow = z.object({
  previous: z.string().nullable(),
  user_id: z.number(),
  assistant_id: z.number().nullable(),
  type: z.enum(['inbound', 'outbound', 'web']),
  status: z.string(),
  assistant_phone_number: z.string().nullable(),
  client_phone_number: z.string().nullable(),
  variables: z.record(z.unknown()),
  carrier_call_id: z.string().nullable(),
  carrier_name: z.string().nullable(),
  started_ms: z.number(),
  last_seq: z.number(),
});

/** The answers to repeats of a call's webhook whose tokens still work: the latest ones. */
const MAX_STREAM_TOKENS = 5;

/** A call whose media stream joined on this process: what running it here needs. */
export type ClaimedCall = z.infer<typeof claimedRow> & { readonly id: number };

/**
 * The media stream presenting the token whose hash is `tokenHash` joins call `id` on process
 * `holder`: the token is used up and `holder` holds the call from now on. Null when the token is
 * wrong, used, expired (by `nowIso`), or the call has ended.
 */
export async function claimStream(db: CommonQueryMethods, id: number, tokenHash: Buffer, nowIso: string, holder: string): Promise<ClaimedCall | null> {
  const row = await db.maybeOne(sql.type(claimedRow)`
    UPDATE calls c SET holder = ${holder}, stream_token_hashes = NULL, updated_at = now()
    FROM (SELECT id, holder FROM calls WHERE id = ${id} FOR UPDATE) AS before
    WHERE c.id = before.id AND ${sql.binary(tokenHash)}::bytea = ANY(c.stream_token_hashes) AND c.stream_expires_at > ${nowIso}::timestamptz AND c.ended_at IS NULL
    RETURNING before.holder::text AS previous, c.user_id, c.assistant_id, c.type, c.status, c.assistant_phone_number, c.client_phone_number,
      c.variables, c.carrier_call_id, c.carrier_name, (extract(epoch FROM COALESCE((SELECT at FROM call_events WHERE call_id = c.id AND seq = 0), c.created_at)) * 1000)::float8 AS started_ms,
      (SELECT COALESCE(max(seq), -1) FROM call_events WHERE call_id = c.id) AS last_seq`);
  return row && { ...row, id };
}

/**
 * A carrier repeats the voice webhook of call `carrierCallId` (to any process): while its stream
 * has not joined, the token hashed to `tokenHash` is one more its stream may present (whichever
 * answer the carrier follows works, the last few of them). `stream`: its id, the token added;
 * `joined`: the call exists but its stream joined or it ended; null: no such call.
 */
export async function renewStreamToken(db: CommonQueryMethods, carrierName: string, carrierCallId: string, tokenHash: Buffer): Promise<{ kind: 'stream'; id: number } | { kind: 'joined' } | null> {
  const row = await db.maybeOne(sql.type(z.object({ id: z.number(), renewed: z.boolean() }))`
    WITH renewed AS (
      UPDATE calls SET stream_token_hashes = (${sql.binary(tokenHash)}::bytea || stream_token_hashes)[1:${MAX_STREAM_TOKENS}]
      WHERE carrier_call_id = ${carrierCallId} AND carrier_name = ${carrierName} AND ended_at IS NULL AND stream_token_hashes IS NOT NULL
      RETURNING id)
    SELECT c.id, EXISTS (SELECT 1 FROM renewed) AS renewed FROM calls c WHERE c.carrier_call_id = ${carrierCallId}`);
  if (!row) return null;
  return row.renewed ? { kind: 'stream', id: row.id } : { kind: 'joined' };
}

/** Tells the process holding (or that held) call `id` to look at it again: a request, or its taking-over. */
export async function notifyHolder(db: CommonQueryMethods, id: number): Promise<void> {
  await db.query(sql.unsafe`SELECT pg_notify(${CALL_COMMANDS_CHANNEL}, ${String(id)})`);
}

/** Of `ids` (calls this process has held), those not ended that another process holds now. */
export async function handedOver(db: CommonQueryMethods, holder: string, ids: readonly number[]): Promise<readonly number[]> {
  if (ids.length === 0) return [];
  return db.anyFirst(sql.type(z.object({ id: z.number() }))`
    SELECT id FROM calls WHERE id = ANY(${sql.array([...ids], 'int8')}) AND ended_at IS NULL AND holder IS DISTINCT FROM ${holder}`);
}

/** The process holding call `id` (null: it has ended, or none was ever recorded). */
export async function holderOf(db: CommonQueryMethods, id: number): Promise<string | null> {
  return db.maybeOneFirst(sql.type(z.object({ holder: z.string().nullable() }))`SELECT holder::text AS holder FROM calls WHERE id = ${id} AND ended_at IS NULL`);
}

/** The carrier's id of call `id`, when the carrier has given one. */
export async function carrierCallIdOf(db: CommonQueryMethods, id: number): Promise<string | null> {
  return db.maybeOneFirst(sql.type(z.object({ carrier_call_id: z.string().nullable() }))`SELECT carrier_call_id FROM calls WHERE id = ${id}`);
}

/** Channel on which a call's owner asks the process holding it to act (payload: the call id). */
export const CALL_COMMANDS_CHANNEL = 'call_commands';

/** A request to the process holding a live call. */
export type CallCommand =
  | { readonly command: 'hangup' }
  | { readonly command: 'status'; readonly carrier: string; readonly carrierCallId: string; readonly status?: string; readonly answeredBy?: string };

const commandRow = z.object({ id: z.number(), call_id: z.number(), command: z.enum(['hangup', 'status']), data: z.record(z.unknown()) });

/**
 * Asks the process holding a live call to carry out `command` (a row it takes, and a notification
 * to make it prompt); false when there is no such call to ask about: ended, or (for a carrier's
 * status) not of that carrier or known to it by another call id.
 */
export async function requestCallCommand(db: CommonQueryMethods, callId: number, command: CallCommand): Promise<boolean> {
  const { command: name, ...data } = command;
  const ofCarrier = command.command === 'status'
    ? sql.fragment`AND carrier_name = ${command.carrier} AND (carrier_call_id IS NULL OR carrier_call_id = ${command.carrierCallId})`
    : sql.fragment``;
  const result = await db.query(sql.unsafe`
    INSERT INTO call_commands (call_id, command, data)
    SELECT id, ${name}, ${sql.jsonb(data as never)} FROM calls WHERE id = ${callId} AND ended_at IS NULL ${ofCarrier}
    RETURNING pg_notify(${CALL_COMMANDS_CHANNEL}, call_id::text)`);
  return result.rowCount > 0;
}

/** Takes the requests waiting for any of `callIds` that `holder` holds, oldest first. */
export async function takeCallCommands(db: CommonQueryMethods, holder: string, callIds: readonly number[]): Promise<Array<{ callId: number } & CallCommand>> {
  if (callIds.length === 0) return [];
  const rows = await db.any(sql.type(commandRow)`
    DELETE FROM call_commands cc USING calls c
    WHERE cc.call_id = c.id AND c.holder = ${holder} AND c.id = ANY(${sql.array([...callIds], 'int8')})
    RETURNING cc.id, cc.call_id, cc.command, cc.data`);
  return [...rows].sort((a, b) => a.id - b.id).map((row) => ({ callId: row.call_id, command: row.command, ...row.data }) as { callId: number } & CallCommand);
}
