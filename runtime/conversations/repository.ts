import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { ConversationType } from '../prices.js';
import { storableJson, storableText } from '../store/text.js';

export const conversationRow = z.object({
  id: z.string(),
  assistant_id: z.number().nullable(),
  user_id: z.number(),
  type: z.enum(['test', 'widget', 'whatsapp', 'sms', 'api']),
  variables: z.record(z.union([z.string(), z.number(), z.boolean()])),
  ai_enabled: z.boolean(),
  message_count: z.number(),
  total_cost: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ConversationRow = z.infer<typeof conversationRow>;

export const functionCallRecord = z.object({ name: z.string(), arguments: z.record(z.unknown()), result: z.unknown() });
export type FunctionCallRecord = z.infer<typeof functionCallRecord>;

export const messageRow = z.object({
  id: z.number(),
  role: z.enum(['user', 'assistant']),
  content: z.string(),
  function_calls: z.array(functionCallRecord).nullable(),
  cost: z.number(),
  /** On a channel's conversation, how far the message went (outboxStore.ts); null elsewhere. */
  delivery_status: z.enum(['received', 'pending', 'sent', 'delivered', 'read', 'failed']).nullable(),
  created_at: z.string(),
});
export type MessageRow = z.infer<typeof messageRow>;

/** Notified with `<conversation id> <message id>` each time a message is stored. */
export const MESSAGES_CHANNEL = 'conversation_messages';

const conversationColumns = sql.fragment`id, assistant_id, user_id, type, variables, ai_enabled, message_count, total_cost, created_at, updated_at`;

export async function insertConversation(
  db: CommonQueryMethods,
  input: { assistantId: number; userId: number; type: ConversationType; variables: Record<string, unknown> },
): Promise<ConversationRow> {
  return db.one(sql.type(conversationRow)`
    INSERT INTO conversations (assistant_id, user_id, type, variables)
    VALUES (${input.assistantId}, ${input.userId}, ${input.type}, ${sql.jsonb(input.variables as never)})
    RETURNING ${conversationColumns}`);
}

export async function findConversation(db: CommonQueryMethods, id: string): Promise<ConversationRow | null> {
  return db.maybeOne(sql.type(conversationRow)`SELECT ${conversationColumns} FROM conversations WHERE id = ${id}`);
}

/** Appends a message and moves the conversation's counters in the same statement pair. */
export async function insertMessage(
  db: CommonQueryMethods,
  input: {
    conversationId: string;
    role: 'user' | 'assistant';
    content: string;
    functionCalls?: FunctionCallRecord[] | null;
    cost?: number;
    replyPending?: boolean;
    /** The message starts a turn held by `owner` for `seconds`, or ends the turn `owner` holds. */
    turn?: { readonly takes: string; readonly seconds: number } | { readonly ends: string | undefined };
  },
): Promise<MessageRow> {
  const row = await db.one(sql.type(messageRow)`
    INSERT INTO conversation_messages (conversation_id, role, content, function_calls, cost, reply_pending)
    VALUES (${input.conversationId}, ${input.role}, ${storableText(input.content)},
      ${input.functionCalls?.length ? sql.jsonb(storableJson(input.functionCalls) as never) : null}, ${(input.cost ?? 0).toFixed(6)}, ${input.replyPending ?? false})
    RETURNING id, role, content, function_calls, cost, delivery_status, created_at`);
  // Processes with sockets on the conversation hear of the message when it commits (MESSAGES_CHANNEL).
  await db.query(sql.unsafe`
    UPDATE conversations SET message_count = message_count + 1, total_cost = total_cost + ${(input.cost ?? 0).toFixed(6)}, updated_at = now()${turnChange(input.turn)}
    WHERE id = ${input.conversationId}
    RETURNING pg_notify(${MESSAGES_CHANNEL}, id::text || ' ' || ${row.id})`);
  return row;
}

/** The latest `limit` messages stored after `afterId`, oldest first. */
export async function recentMessages(db: CommonQueryMethods, conversationId: string, afterId: number, limit = 50): Promise<readonly MessageRow[]> {
  const rows = await db.any(sql.type(messageRow)`
    SELECT id, role, content, function_calls, cost, delivery_status, created_at FROM conversation_messages
    WHERE conversation_id = ${conversationId} AND id > ${afterId} ORDER BY id DESC LIMIT ${limit}`);
  return [...rows].reverse();
}

const idRow = z.object({ id: z.number() });

export async function lastMessageId(db: CommonQueryMethods, conversationId: string): Promise<number> {
  return db.oneFirst(sql.type(idRow)`SELECT coalesce(max(id), 0) AS id FROM conversation_messages WHERE conversation_id = ${conversationId}`);
}

/** The reply to a charged message was saved: nothing is owed for it any more. */
export async function settleReply(db: CommonQueryMethods, messageId: number): Promise<void> {
  await db.query(sql.unsafe`UPDATE conversation_messages SET reply_pending = false WHERE id = ${messageId} AND reply_pending`);
}

/** Takes a message's charge back off the conversation (the ledger refund is posted by the caller). */
export async function clearMessageCost(db: CommonQueryMethods, conversationId: string, messageId: number, cost: number): Promise<void> {
  await db.query(sql.unsafe`UPDATE conversation_messages SET cost = 0, reply_pending = false WHERE id = ${messageId}`);
  await db.query(sql.unsafe`UPDATE conversations SET total_cost = total_cost - ${cost.toFixed(6)} WHERE id = ${conversationId}`);
}

export async function listMessages(db: CommonQueryMethods, conversationId: string): Promise<readonly MessageRow[]> {
  return db.any(sql.type(messageRow)`
    SELECT id, role, content, function_calls, cost, delivery_status, created_at FROM conversation_messages
    WHERE conversation_id = ${conversationId} ORDER BY id`);
}

export async function setAiEnabled(db: CommonQueryMethods, userId: number, id: string, enabled: boolean): Promise<ConversationRow | null> {
  return db.maybeOne(sql.type(conversationRow)`
    UPDATE conversations SET ai_enabled = ${enabled}, updated_at = now() WHERE id = ${id} AND user_id = ${userId}
    RETURNING ${conversationColumns}`);
}

export const listItemRow = conversationRow.extend({ assistant_uuid: z.string(), assistant_name: z.string() });
export type ConversationListRow = z.infer<typeof listItemRow>;

export interface ConversationFilters {
  readonly type?: ConversationType;
  readonly assistantId?: number;
  /** Inclusive UTC days, `YYYY-MM-DD`. */
  readonly dateFrom?: string;
  readonly dateTo?: string;
}

export async function listConversations(
  db: CommonQueryMethods,
  userId: number,
  filters: ConversationFilters,
  page: number,
  perPage: number,
): Promise<{ items: readonly ConversationListRow[]; total: number }> {
  // Conversations of the user's assistants (spec 4.6): those of a deleted assistant are not listed.
  const conditions = [sql.fragment`c.user_id = ${userId}`, sql.fragment`c.assistant_id IS NOT NULL`];
  if (filters.type) conditions.push(sql.fragment`c.type = ${filters.type}`);
  if (filters.assistantId !== undefined) conditions.push(sql.fragment`c.assistant_id = ${filters.assistantId}`);
  if (filters.dateFrom) conditions.push(sql.fragment`c.created_at >= (${filters.dateFrom}::date)::timestamp AT TIME ZONE 'UTC'`);
  if (filters.dateTo) conditions.push(sql.fragment`c.created_at < ((${filters.dateTo}::date + 1)::timestamp AT TIME ZONE 'UTC')`);
  const where = sql.join(conditions, sql.fragment` AND `);
  const [items, total] = await Promise.all([
    db.any(sql.type(listItemRow)`
      SELECT c.id, c.assistant_id, c.user_id, c.type, c.variables, c.ai_enabled, c.message_count, c.total_cost, c.created_at, c.updated_at,
        a.uuid::text AS assistant_uuid, a.name AS assistant_name
      FROM conversations c JOIN assistants a ON a.id = c.assistant_id
      WHERE ${where}
      ORDER BY c.created_at DESC, c.id
      LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`),
    db.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM conversations c WHERE ${where}`),
  ]);
  return { items, total };
}

const lockedConversationRow = z.object({ ai_enabled: z.boolean(), turn_busy: z.boolean(), message_count: z.number() });

/** Locks the conversation row: whether AI answers, whether a turn holds it, and how many messages it has. */
export async function lockConversation(db: CommonQueryMethods, id: string) {
  return db.one(sql.type(lockedConversationRow)`
    SELECT ai_enabled, coalesce(turn_until > now(), false) AS turn_busy, message_count FROM conversations WHERE id = ${id} FOR UPDATE`);
}

/** The conversation-row assignments for a message that takes or ends a turn (none otherwise). */
function turnChange(turn: NonNullable<Parameters<typeof insertMessage>[1]['turn']> | undefined) {
  if (!turn) return sql.fragment``;
  if ('takes' in turn) return sql.fragment`, turn_until = now() + make_interval(secs => ${turn.seconds}), turn_owner = ${turn.takes}::uuid`;
  return sql.fragment`, turn_until = CASE WHEN turn_owner = ${turn.ends ?? null}::uuid THEN NULL ELSE turn_until END`;
}

/** Renews the turn `owner` holds for `seconds` more; `null` ends it. Another owner's turn is left alone. */
export async function holdTurn(db: CommonQueryMethods, id: string, owner: string, seconds: number | null): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE conversations SET turn_until = ${seconds === null ? null : sql.fragment`now() + make_interval(secs => ${seconds})`}
    WHERE id = ${id} AND turn_owner = ${owner}::uuid`);
}

const unanswered = z.object({ id: z.number(), conversation_id: z.string(), user_id: z.number(), cost: z.number() });

/** Charged messages still owed a reply after `olderThanSeconds` (their turn's process stopped). */
export async function unansweredMessages(db: CommonQueryMethods, olderThanSeconds: number, limit: number) {
  return db.any(sql.type(unanswered)`
    SELECT m.id, m.conversation_id, c.user_id, m.cost::float8 AS cost
    FROM conversation_messages m JOIN conversations c ON c.id = m.conversation_id
    WHERE m.reply_pending AND m.created_at < now() - make_interval(secs => ${olderThanSeconds})
    ORDER BY m.created_at LIMIT ${limit}`);
}

/** Locks a message still owed a reply; false when it was answered or refunded meanwhile. */
export async function lockUnanswered(db: CommonQueryMethods, messageId: number): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM conversation_messages WHERE id = ${messageId} AND reply_pending FOR UPDATE`);
}

/** Why each failed reply of a channel conversation was not delivered: the channel's words for its first part that failed. */
export async function deliveryErrors(db: CommonQueryMethods, conversationId: string): Promise<Map<number, string>> {
  const rows = await db.any(sql.type(z.object({ message_id: z.number(), last_error: z.string() }))`
    SELECT DISTINCT ON (message_id) message_id, last_error FROM channel_outbound
    WHERE conversation_id = ${conversationId} AND state = 'failed' AND last_error IS NOT NULL ORDER BY message_id, id`);
  return new Map(rows.map((row) => [row.message_id, row.last_error]));
}
