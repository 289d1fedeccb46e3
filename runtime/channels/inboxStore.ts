import { sql, type CommonQueryMethods, type DatabaseTransactionConnection } from 'slonik';
import { z } from 'zod';
import { storableJson, storableText } from '../store/text.js';
import type { ChannelRow } from './repository.js';

/**
 * The inbox's statements: inbound messages kept before their webhook is acknowledged, the
 * conversation each belongs to, and the lease of the process answering a conversation's messages.
 */

/** A customer writing again within this long continues their conversation; after it, a new one starts. */
export const CONVERSATION_WINDOW_MS = 24 * 3600 * 1000;

export interface InboundInput {
  readonly customer: string;
  /** The channel's id of the message; a webhook retried with the same id is taken once. */
  readonly externalId: string;
  /** `text`, `stop`, `start`, or a non-text kind (`audio`, `image`, `location`, ...). */
  readonly kind: string;
  readonly body: string;
  readonly media?: Record<string, unknown>;
  /** The customer's name as the channel gives it (WhatsApp's profile name). */
  readonly customerName?: string;
  /** When the customer wrote (the injected clock's time of arrival): the 24-hour window runs from it. */
  readonly at: number;
}

export type Received = { readonly duplicate: true } | { readonly duplicate: false; readonly conversationId: string; readonly takesInbox: boolean };

/**
 * Keeps an inbound message in the customer's conversation with the channel's assistant (one they
 * wrote in within 24 hours, else a new one) and takes the conversation's inbox for `owner` when no
 * live process holds it. Serialised per channel and customer, so two processes receiving the
 * customer's first two messages at once agree on one conversation.
 */
export async function receiveInbound(tx: DatabaseTransactionConnection, channel: ChannelRow, input: InboundInput, owner: string, leaseSeconds: number): Promise<Received> {
  await tx.query(sql.unsafe`SELECT pg_advisory_xact_lock(hashtextextended(${`channel:${channel.id}:${input.customer}`}, 0))`);
  if (await tx.exists(sql.unsafe`SELECT 1 FROM channel_inbound WHERE channel_id = ${channel.id} AND external_id = ${input.externalId}`)) return { duplicate: true };
  const at = new Date(input.at).toISOString();
  const since = new Date(input.at - CONVERSATION_WINDOW_MS).toISOString();
  let conversationId = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
    SELECT id FROM conversations
    WHERE channel_id = ${channel.id} AND customer_phone = ${input.customer} AND assistant_id = ${channel.assistant_id} AND last_customer_at > ${since}::timestamptz
    ORDER BY last_customer_at DESC LIMIT 1 FOR UPDATE`);
  if (conversationId === null) {
    const variables = { customer_phone: input.customer, ...(input.customerName ? { customer_name: input.customerName } : {}) };
    conversationId = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
      INSERT INTO conversations (assistant_id, user_id, type, variables, channel_id, customer_phone, last_customer_at)
      VALUES (${channel.assistant_id}, ${channel.user_id}, ${channel.type}, ${sql.jsonb(storableJson(variables) as never)}, ${channel.id}, ${input.customer}, ${at}::timestamptz)
      RETURNING id`);
  } else {
    await tx.query(sql.unsafe`UPDATE conversations SET last_customer_at = greatest(last_customer_at, ${at}::timestamptz) WHERE id = ${conversationId}`);
  }
  await tx.query(sql.unsafe`
    INSERT INTO channel_inbound (channel_id, external_id, conversation_id, kind, body, media)
    VALUES (${channel.id}, ${input.externalId}, ${conversationId}, ${input.kind}, ${storableText(input.body)}, ${input.media ? sql.jsonb(storableJson(input.media) as never) : null})`);
  return { duplicate: false, conversationId, takesInbox: await takeInbox(tx, conversationId, owner, leaseSeconds) };
}

/** Takes the conversation's inbox for `owner` unless a live lease holds it. */
export async function takeInbox(db: CommonQueryMethods, conversationId: string, owner: string, leaseSeconds: number): Promise<boolean> {
  const taken = await db.query(sql.unsafe`
    UPDATE conversations SET inbox_owner = ${owner}::uuid, inbox_until = now() + make_interval(secs => ${leaseSeconds})
    WHERE id = ${conversationId} AND (inbox_until IS NULL OR inbox_until < now())`);
  return taken.rowCount > 0;
}

/** @returns false when `owner` no longer holds it (its lease lapsed and another process took it). */
export async function renewInbox(db: CommonQueryMethods, conversationId: string, owner: string, leaseSeconds: number): Promise<boolean> {
  const renewed = await db.query(sql.unsafe`
    UPDATE conversations SET inbox_until = now() + make_interval(secs => ${leaseSeconds})
    WHERE id = ${conversationId} AND inbox_owner = ${owner}::uuid`);
  return renewed.rowCount > 0;
}

/**
 * Gives the inbox up when no message waits in it: under the conversation's lock, so a message kept
 * by another process just before is seen here (and answered), and one kept just after finds the
 * inbox free (and its process answers it). `force` gives it up all the same (a stop: another
 * process takes the rest at once).
 * @returns whether it was given up.
 */
export async function releaseInbox(db: DatabaseTransactionConnection, conversationId: string, owner: string, force = false): Promise<boolean> {
  await db.query(sql.unsafe`SELECT 1 FROM conversations WHERE id = ${conversationId} FOR UPDATE`);
  if (!force && (await db.exists(sql.unsafe`SELECT 1 FROM channel_inbound WHERE conversation_id = ${conversationId} AND NOT done`))) return false;
  await db.query(sql.unsafe`UPDATE conversations SET inbox_owner = NULL, inbox_until = NULL WHERE id = ${conversationId} AND inbox_owner = ${owner}::uuid`);
  return true;
}

export const inboundRow = z.object({
  id: z.number(),
  channel_id: z.number(),
  conversation_id: z.string(),
  kind: z.string(),
  body: z.string(),
  media: z.record(z.unknown()).nullable(),
  external_id: z.string(),
  /** The customer's number (E.164), whom the conversation's replies go to. */
  customer: z.string(),
  /** The customer message an earlier attempt stored for it (see `withdrawAttempt`). */
  message_id: z.number().nullable(),
  attempts: z.number(),
});
export type InboundRow = z.infer<typeof inboundRow>;

/** The conversation's oldest message not yet handled. */
export async function nextInbound(db: CommonQueryMethods, conversationId: string): Promise<InboundRow | null> {
  return db.maybeOne(sql.type(inboundRow)`
    SELECT i.id, i.channel_id, i.conversation_id, i.kind, i.body, i.media, i.external_id, c.customer_phone AS customer, i.message_id, i.attempts
    FROM channel_inbound i JOIN conversations c ON c.id = i.conversation_id
    WHERE i.conversation_id = ${conversationId} AND NOT i.done ORDER BY i.id LIMIT 1`);
}

/**
 * The conversation's inbox is no longer this process's (its lease lapsed and another process took
 * it): what was being stored for the message is not, and the other process answers it.
 */
export class InboxLost extends Error {
  override readonly name = 'InboxLost';
}

/**
 * Marks the message handled, in the transaction that stores what was done for it (a reply, a
 * notice, the message kept), fenced by the inbox's lease: only while `owner` still holds the
 * conversation's inbox and the message is not handled yet.
 * @throws InboxLost otherwise: the transaction rolls back, and the process holding the inbox answers it.
 */
export async function settleInbound(db: CommonQueryMethods, id: number, owner: string): Promise<void> {
  const marked = await db.query(sql.unsafe`
    UPDATE channel_inbound i SET done = true FROM conversations c
    WHERE i.id = ${id} AND NOT i.done AND c.id = i.conversation_id AND c.inbox_owner = ${owner}::uuid`);
  if (marked.rowCount === 0) throw new InboxLost('the conversation inbox was taken over by another process');
}

/**
 * Records the customer message the engine stored for it, in the transaction that stores it (which
 * holds the conversation's row), fenced as `settleInbound` is.
 * @throws InboxLost when `owner` no longer holds the inbox: the message is not stored, nor charged, nor answered here.
 */
export async function recordInboundMessage(db: CommonQueryMethods, id: number, owner: string, messageId: number): Promise<void> {
  const recorded = await db.query(sql.unsafe`
    UPDATE channel_inbound i SET message_id = ${messageId} FROM conversations c
    WHERE i.id = ${id} AND NOT i.done AND c.id = i.conversation_id AND c.inbox_owner = ${owner}::uuid`);
  if (recorded.rowCount === 0) throw new InboxLost('the conversation inbox was taken over by another process');
}

/** The customer message stored in the history for it, if one is (none once an attempt's was withdrawn). */
export async function inboundMessageOf(db: CommonQueryMethods, id: number): Promise<number | null> {
  return db.oneFirst(sql.type(z.object({ message_id: z.number().nullable() }))`SELECT message_id FROM channel_inbound WHERE id = ${id}`);
}

/** An unexpected failure: counted, and @returns the attempts made so far. */
export async function countFailedAttempt(db: CommonQueryMethods, id: number): Promise<number> {
  return db.oneFirst(sql.type(z.object({ attempts: z.number() }))`UPDATE channel_inbound SET attempts = attempts + 1 WHERE id = ${id} RETURNING attempts`);
}

const storedRow = z.object({ id: z.number(), conversation_id: z.string(), cost: z.number(), reply_pending: z.boolean(), turn_busy: z.boolean() });

/**
 * Takes back the customer message an earlier attempt stored (its turn cut short by a stop or a
 * kill, no reply saved): its charge refunded if it is still held, the message removed, so the
 * attempt about to be made stores it once again and the history holds it once.
 * @returns false, withdrawing nothing, while a turn still holds the conversation: the earlier
 *   attempt may be running yet (a process whose inbox lease lapsed), and is waited for.
 */
export async function withdrawAttempt(db: DatabaseTransactionConnection, messageId: number, userId: number, refund: (message: { conversationId: string; messageId: number; userId: number; cost: number }) => Promise<unknown>): Promise<boolean> {
  const stored = await db.maybeOne(sql.type(storedRow)`
    SELECT m.id, m.conversation_id::text, m.cost::float8 AS cost, m.reply_pending, coalesce(c.turn_until > now(), false) AS turn_busy
    FROM conversation_messages m JOIN conversations c ON c.id = m.conversation_id
    WHERE m.id = ${messageId} AND m.role = 'user' FOR UPDATE`);
  if (stored?.turn_busy) return false;
  // A charge settled otherwise (not held for a reply, not refunded) stays, with its message.
  if (!stored || (!stored.reply_pending && stored.cost > 0)) return true;
  if (stored.reply_pending) await refund({ conversationId: stored.conversation_id, messageId, userId, cost: stored.cost });
  await db.query(sql.unsafe`DELETE FROM conversation_messages WHERE id = ${messageId}`);
  await db.query(sql.unsafe`UPDATE conversations SET message_count = message_count - 1 WHERE id = ${stored.conversation_id}`);
  return true;
}

/**
 * Conversations with messages waiting and no live process answering them (it stopped). One whose
 * turn is still held is left until the turn ends or lapses: the attempt that holds it may yet be
 * running (see `withdrawAttempt`).
 */
export async function abandonedInboxes(db: CommonQueryMethods, limit: number): Promise<readonly string[]> {
  return db.anyFirst(sql.type(z.object({ id: z.string() }))`
    SELECT DISTINCT i.conversation_id AS id FROM channel_inbound i JOIN conversations c ON c.id = i.conversation_id
    WHERE NOT i.done AND (c.inbox_until IS NULL OR c.inbox_until < now()) AND (c.turn_until IS NULL OR c.turn_until < now())
    LIMIT ${limit}`);
}

const noticeRow = z.object({ balance_notice_at: z.string().nullable() });

/** Locks the conversation and says whether the "cannot answer now" notice was sent since the last answer. */
export async function lockBalanceNotice(db: CommonQueryMethods, conversationId: string): Promise<boolean> {
  const row = await db.one(sql.type(noticeRow)`SELECT balance_notice_at FROM conversations WHERE id = ${conversationId} FOR UPDATE`);
  return row.balance_notice_at !== null;
}

export async function setBalanceNotice(db: CommonQueryMethods, conversationId: string, sent: boolean): Promise<void> {
  await db.query(sql.unsafe`UPDATE conversations SET balance_notice_at = ${sent ? sql.fragment`now()` : null} WHERE id = ${conversationId} AND (balance_notice_at IS NULL) = ${sent}`);
}
