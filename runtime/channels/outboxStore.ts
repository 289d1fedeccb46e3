import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { storableText } from '../store/text.js';
import { channelRow, type ChannelRow } from './repository.js';

/**
 * The outbox's statements: each message to a customer is kept, in the transaction that stores it,
 * as the parts the channel takes (a long reply is split), and sent in order per conversation. A
 * part's state follows the channel's status reports forward only (sent, delivered, read; failed at
 * any point); its message's `delivery_status` is that of its least advanced part.
 */

export const OUTBOX_LEASE_SECONDS = 30;

/** Queues a stored message's parts for the channel. */
export async function enqueueParts(
  db: CommonQueryMethods,
  input: { channelId: number; conversationId: string; messageId: number; recipient: string; parts: readonly string[] },
): Promise<void> {
  if (input.parts.length === 0) return;
  await db.query(sql.unsafe`
    INSERT INTO channel_outbound (channel_id, conversation_id, message_id, part, recipient, body)
    SELECT ${input.channelId}, ${input.conversationId}::uuid, ${input.messageId}, part, ${input.recipient}, body
    FROM unnest(${sql.array(input.parts.map(storableText), 'text')}::text[]) WITH ORDINALITY AS p(body, part)`);
  await db.query(sql.unsafe`UPDATE conversation_messages SET delivery_status = 'pending' WHERE id = ${input.messageId}`);
}

export const outboundRow = z.object({
  id: z.number(),
  channel_id: z.number(),
  conversation_id: z.string(),
  message_id: z.number(),
  recipient: z.string(),
  body: z.string(),
  attempts: z.number(),
});
export type OutboundRow = z.infer<typeof outboundRow>;

/**
 * Takes the next part due: queued (its retry's time come) or left sending by a stopped process,
 * and only when no earlier part of its conversation still waits, so a conversation's messages
 * leave in order. The attempt is counted.
 */
export async function claimPart(db: CommonQueryMethods): Promise<OutboundRow | null> {
  return db.maybeOne(sql.type(outboundRow)`
    WITH next AS (
      SELECT o.id FROM channel_outbound o
      WHERE ((o.state = 'queued' AND o.next_attempt_at <= now()) OR (o.state = 'sending' AND o.lease_until < now()))
        AND NOT EXISTS (
          SELECT 1 FROM channel_outbound e WHERE e.conversation_id = o.conversation_id AND e.id < o.id AND e.state IN ('queued', 'sending')
        )
      ORDER BY o.next_attempt_at, o.id LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    UPDATE channel_outbound o SET state = 'sending', attempts = o.attempts + 1, lease_until = now() + make_interval(secs => ${OUTBOX_LEASE_SECONDS})
    FROM next WHERE o.id = next.id
    RETURNING o.id, o.channel_id, o.conversation_id::text, o.message_id, o.recipient, o.body, o.attempts`);
}

/**
 * Right before the channel is asked: the part is still this attempt's (its lease had not lapsed
 * to another process's claim), and its lease is renewed for the send.
 * @returns the part's channel; null when the part is no longer this attempt's (or its channel was deleted, and the part with it).
 */
export async function stillSending(db: CommonQueryMethods, part: OutboundRow): Promise<ChannelRow | null> {
  return db.maybeOne(sql.type(channelRow)`
    UPDATE channel_outbound o SET lease_until = now() + make_interval(secs => ${OUTBOX_LEASE_SECONDS})
    FROM channels c
    WHERE o.id = ${part.id} AND o.state = 'sending' AND o.attempts = ${part.attempts} AND c.id = o.channel_id
    RETURNING c.id, c.user_id, c.assistant_id, c.type, c.address, c.phone_number_id, c.sealed_secrets, c.created_at, c.updated_at`);
}

const STATE_RANK = sql.fragment`(CASE state WHEN 'queued' THEN 0 WHEN 'sending' THEN 0 WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 WHEN 'read' THEN 3 ELSE 4 END)`;

/** The message's delivery status from its parts. */
const refreshed = (messageId: number) => sql.fragment`
    UPDATE conversation_messages m SET delivery_status = s.status FROM (
      SELECT CASE WHEN bool_or(state = 'failed') THEN 'failed'
        WHEN bool_or(state IN ('queued', 'sending')) THEN 'pending'
        WHEN bool_and(state = 'read') THEN 'read'
        WHEN bool_and(state IN ('delivered', 'read')) THEN 'delivered'
        ELSE 'sent' END AS status
      FROM channel_outbound WHERE message_id = ${messageId}
    ) s WHERE m.id = ${messageId} AND s.status IS NOT NULL`;

async function refreshMessage(db: CommonQueryMethods, messageId: number): Promise<void> {
  await db.query(sql.unsafe`${refreshed(messageId)}`);
}

/**
 * The channel took the part under its id (recorded only by the attempt that holds it: `attempts`
 * fences a lapsed one; null: an id that could not be kept, whose status reports are then not
 * matched), then the reports on that id that came first. `db` is the pool: each statement commits
 * on its own, which `applyStatus` relies on.
 */
export async function partSent(db: CommonQueryMethods, part: OutboundRow, externalId: string | null): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE channel_outbound SET state = 'sent', external_id = ${externalId}, lease_until = NULL, last_error = NULL
    WHERE id = ${part.id} AND state = 'sending' AND attempts = ${part.attempts}`);
  if (externalId === null) return refreshMessage(db, part.message_id);
  // The message's status and the reports that came first, in one statement after the id's own.
  const early = await db.any(sql.type(earlyRow)`
    WITH refreshed AS (${refreshed(part.message_id)} RETURNING m.id)
    DELETE FROM channel_early_statuses WHERE channel_id = ${part.channel_id} AND external_id = ${externalId} RETURNING status, error`);
  await applyReports(db, part.channel_id, externalId, early);
}

/** The attempt failed: tried again after `retryInMs`, or failed for good when it is null. */
export async function partFailed(db: CommonQueryMethods, part: OutboundRow, error: string, retryInMs: number | null): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE channel_outbound SET state = ${retryInMs === null ? 'failed' : 'queued'}, lease_until = NULL, last_error = ${storableText(error)},
      next_attempt_at = now() + make_interval(secs => ${(retryInMs ?? 0) / 1000})
    WHERE id = ${part.id} AND state = 'sending' AND attempts = ${part.attempts}`);
  await refreshMessage(db, part.message_id);
}

type ReportedStatus = 'sent' | 'delivered' | 'read' | 'failed';

/**
 * A status report from the channel about one of its ids: moves the part forward (never back;
 * `failed` at any point). A report on an id no part has yet is kept for a while: the part may be
 * being recorded with it (`partSent`). `db` is the pool: the report is kept (committed) before
 * the part is looked for again, and `partSent` records the id (committed) before it looks for
 * reports, so one of the two always sees the other.
 * @returns whether a part of the channel had that id.
 */
export async function applyStatus(db: CommonQueryMethods, channelId: number, externalId: string, status: ReportedStatus, error?: string): Promise<boolean> {
  if (await applyKnown(db, channelId, externalId, status, error)) return true;
  await db.query(sql.unsafe`DELETE FROM channel_early_statuses WHERE received_at < now() - interval '10 minutes'`);
  await db.query(sql.unsafe`
    INSERT INTO channel_early_statuses (channel_id, external_id, status, error)
    VALUES (${channelId}, ${externalId}, ${status}, ${error === undefined ? null : storableText(error)})`);
  if (await db.exists(sql.unsafe`SELECT 1 FROM channel_outbound WHERE channel_id = ${channelId} AND external_id = ${externalId}`)) await applyEarly(db, channelId, externalId);
  return false;
}

const earlyRow = z.object({ status: z.enum(['sent', 'delivered', 'read', 'failed']), error: z.string().nullable() });

/** Applies (once: they are taken off as they are read) the reports kept for an id before its part had it. */
async function applyEarly(db: CommonQueryMethods, channelId: number, externalId: string): Promise<void> {
  const early = await db.any(sql.type(earlyRow)`
    DELETE FROM channel_early_statuses WHERE channel_id = ${channelId} AND external_id = ${externalId} RETURNING status, error`);
  await applyReports(db, channelId, externalId, early);
}

async function applyReports(db: CommonQueryMethods, channelId: number, externalId: string, reports: ReadonlyArray<z.infer<typeof earlyRow>>): Promise<void> {
  for (const report of reports) await applyKnown(db, channelId, externalId, report.status, report.error ?? undefined);
}

async function applyKnown(db: CommonQueryMethods, channelId: number, externalId: string, status: ReportedStatus, error?: string): Promise<boolean> {
  const rank = { sent: 1, delivered: 2, read: 3, failed: 4 }[status];
  const messageId = await db.maybeOneFirst(sql.type(z.object({ message_id: z.number() }))`
    WITH part AS (SELECT id, message_id FROM channel_outbound WHERE channel_id = ${channelId} AND external_id = ${externalId})
    UPDATE channel_outbound o SET state = CASE WHEN ${STATE_RANK} < ${rank} THEN ${status} ELSE o.state END,
      last_error = coalesce(${error === undefined ? null : storableText(error)}, o.last_error)
    FROM part WHERE o.id = part.id RETURNING part.message_id`);
  if (messageId === null) return false;
  await refreshMessage(db, messageId);
  return true;
}
