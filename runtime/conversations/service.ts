import type { DatabasePool } from 'slonik';
import { findAssistant, findAssistantByUuid, findAssistantWithTools, type AssistantRow, type AssistantWithTools } from '../assistants/repository.js';
import { PlatformError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import { prices, type ConversationType } from '../prices.js';
import { isUuid } from '../../schemas/rules.js';
import { datetime } from '../time.js';
import { renderTemplate } from '../agent/prompts.js';
import { failureReason, type ConversationEngine } from './engine.js';
import type { TurnResult } from './machine.js';
import { unreservedBalance } from '../ledger/holds.js';
import {
  deliveryErrors,
  findConversation,
  insertConversation,
  insertMessage,
  listConversations,
  listMessages,
  recentMessages,
  setAiEnabled,
  type ConversationFilters,
  type ConversationListRow,
  type ConversationRow,
  type MessageRow,
} from './repository.js';

export interface HistoryMessage {
  role: 'user' | 'assistant';
  content: string;
  function_calls?: MessageRow['function_calls'];
  delivery_status?: MessageRow['delivery_status'];
  delivery_error?: string;
}

/** Conversations with a customer on a messaging channel: their history shows the owner each message's delivery. */
const CHANNEL_TYPES: ReadonlySet<ConversationType> = new Set(['whatsapp', 'sms']);

/**
 * Who reads a conversation. Its owner (the caller's token names the assistant's user) sees the
 * function calls of each reply, with their arguments and results, and why a reply failed; anyone
 * else, a visitor, sees the user's and the assistant's words only and a generic failure (the
 * reason goes to the log). The widget socket is always a visitor's (see `visitorEvent`).
 */
export type Reader = 'owner' | 'visitor';

function readerOf(conversation: ConversationRow, callerId: number | undefined): Reader {
  return callerId !== undefined && callerId === conversation.user_id ? 'owner' : 'visitor';
}

/**
 * A channel's conversation is between the business and its customer, who never holds its id: no
 * visitor reads it, writes in it or watches it (404, as for a conversation that does not exist),
 * whoever learnt its id. @throws PlatformError `conversation_not_found`
 */
function publicOnly(conversation: ConversationRow): void {
  if (CHANNEL_TYPES.has(conversation.type)) throw new PlatformError('conversation_not_found');
}

/**
 * @param errors on a channel's conversation (owner only), why each failed reply was not delivered
 *   (`delivery_error`); undefined elsewhere.
 */
export function historyOf(rows: readonly MessageRow[], reader: Reader, errors?: ReadonlyMap<number, string>): HistoryMessage[] {
  return rows.map((row) => {
    const error = errors?.get(row.id);
    return {
      role: row.role,
      content: row.content,
      ...(reader === 'owner' && row.function_calls?.length ? { function_calls: row.function_calls } : {}),
      ...(reader === 'owner' && errors ? { delivery_status: row.role === 'user' ? 'received' : row.delivery_status } : {}),
      ...(reader === 'owner' && error !== undefined && row.delivery_status === 'failed' ? { delivery_error: error } : {}),
    };
  });
}

export function listItem(row: ConversationListRow) {
  return {
    id: row.id,
    assistant_id: row.assistant_uuid,
    assistant_name: row.assistant_name,
    type: row.type,
    message_count: row.message_count,
    total_cost: row.total_cost,
    ai_enabled: row.ai_enabled,
    created_at: datetime(row.created_at),
    updated_at: datetime(row.updated_at),
  };
}

/** Types a visitor cannot start: `test` is free to the caller and `api` is the owner's integration. */
const OWNER_ONLY_TYPES: ReadonlySet<ConversationType> = new Set(['test', 'api']);

/**
 * @param replyOnChannel stores the owner's words in a channel's conversation and sends them on
 *   the channel; undefined when the conversation has no channel.
 */
export function createConversationService({
  pool,
  engine,
  logger,
  replyOnChannel,
}: {
  pool: DatabasePool;
  engine: ConversationEngine;
  logger: Logger;
  replyOnChannel?: (conversationId: string, text: string) => Promise<number | undefined>;
}) {
  async function conversationAndAssistant(id: string): Promise<{ conversation: ConversationRow; assistant: AssistantWithTools }> {
    const conversation = isUuid(id) ? await findConversation(pool, id) : null;
    if (!conversation) throw new PlatformError('conversation_not_found');
    const assistant = conversation.assistant_id === null ? null : await findAssistantWithTools(pool, conversation.user_id, conversation.assistant_id);
    if (!assistant) throw new PlatformError('assistant_not_found');
    return { conversation, assistant };
  }

  return {
    /**
     * Starts a conversation with the assistant of `assistantUuid`. `test` (free) and `api`
     * conversations need the owner's token; `widget` ones are public and charged. Charged types need
     * a balance of at least one message beyond what live calls hold.
     */
    async create(input: { assistantUuid: string; type: ConversationType; variables: Record<string, unknown>; callerId: number | undefined }) {
      const assistant = await findAssistantByUuid(pool, input.assistantUuid);
      if (!assistant) throw new PlatformError('assistant_not_found');
      if (OWNER_ONLY_TYPES.has(input.type) && input.callerId !== assistant.user_id) {
        throw ValidationError.field('type', `The ${input.type} type needs the API key or session token of the assistant owner.`);
      }
      const price = prices.conversationMessage[input.type];
      if (price > 0 && (await unreservedBalance(pool, assistant.user_id)) < price) throw new PlatformError('insufficient_balance');
      const variables = { ...assistant.variables, ...input.variables };
      const greeting = renderTemplate(assistant.initial_message, variables).trim();
      const conversation = await pool.transaction(async (tx) => {
        const row = await insertConversation(tx, { assistantId: assistant.id, userId: assistant.user_id, type: input.type, variables: input.variables });
        if (greeting) await insertMessage(tx, { conversationId: row.id, role: 'assistant', content: greeting });
        return row;
      });
      logger.info({ conversationId: conversation.id, assistantId: assistant.id, userId: assistant.user_id, type: input.type }, 'conversation created');
      return { conversation_id: conversation.id, history: greeting ? [{ role: 'assistant' as const, content: greeting }] : [] };
    },

    /**
     * Answers a message; `callerId` is the user whose token came with it (see `Reader`): a visitor's
     * reply has `function_calls: []` (the key kept, so clients reading it need no change).
     * @throws PlatformError `conversation_not_found`, `assistant_not_found`, `insufficient_balance`,
     *   `provider_failed` (502; the user message is kept, the charge refunded): "Failed to process
     *   message: <reason>" to the owner, the registry's generic message to a visitor. The reason
     *   is logged either way.
     */
    async send(id: string, text: string, callerId?: number): Promise<TurnResult> {
      const { conversation, assistant } = await conversationAndAssistant(id);
      const reader = readerOf(conversation, callerId);
      if (reader === 'owner' && CHANNEL_TYPES.has(conversation.type)) {
        throw ValidationError.field('message', `This conversation is answered on its ${conversation.type} channel: write to the customer with POST /api/user/conversations/${conversation.id}/messages.`);
      }
      publicOnly(conversation);
      try {
        const reply = await engine.send(conversation, assistant, text);
        return reader === 'owner' ? reply : { message: reply.message, function_calls: [] };
      } catch (error) {
        if (error instanceof PlatformError) throw error;
        logger.warn({ err: error, conversationId: conversation.id, assistantId: assistant.id, userId: conversation.user_id }, 'reply failed');
        throw new PlatformError('provider_failed', { message: reader === 'owner' ? `Failed to process message: ${failureReason(error)}` : undefined, cause: error });
      }
    },

    /** The messages in order; function calls only for the owner (see `Reader`). */
    async history(id: string, callerId?: number): Promise<HistoryMessage[]> {
      const conversation = isUuid(id) ? await findConversation(pool, id) : null;
      if (!conversation) throw new PlatformError('conversation_not_found');
      const reader = readerOf(conversation, callerId);
      if (reader === 'visitor') publicOnly(conversation);
      const errors = reader === 'owner' && CHANNEL_TYPES.has(conversation.type) ? await deliveryErrors(pool, id) : undefined;
      return historyOf(await listMessages(pool, id), reader, errors);
    },

    /**
     * A visitor's catch-up (the widget socket after a reconnect or a reload): the latest `limit`
     * messages stored after message `afterId` of this conversation, oldest first, each with its id,
     * in the visitor's view (no function calls).
     */
    async messagesAfter(id: string, afterId: number, limit: number): Promise<Array<{ id: number; role: MessageRow['role']; content: string }>> {
      if (!isUuid(id)) throw new PlatformError('conversation_not_found');
      const conversation = await findConversation(pool, id);
      // Deleted since its socket opened: nothing to catch up on.
      if (!conversation) return [];
      publicOnly(conversation);
      return (await recentMessages(pool, id, afterId, limit)).map((row) => ({ id: row.id, role: row.role, content: row.content }));
    },

    /** Checks a conversation a visitor may watch exists (for the widget's socket); returns it. */
    async find(id: string): Promise<ConversationRow> {
      const { conversation } = await conversationAndAssistant(id);
      publicOnly(conversation);
      return conversation;
    },

    async list(userId: number, filters: ConversationFilters, page: number, perPage: number) {
      const { items, total } = await listConversations(pool, userId, filters, page, perPage);
      return { items: items.map(listItem), total, page, perPage };
    },

    /**
     * The owner writes in their conversation as a human agent: sent on its channel (WhatsApp,
     * SMS), or stored for the widget's socket to show. Not charged.
     */
    async ownerMessage(userId: number, id: string, text: string): Promise<{ id: number; role: 'assistant'; content: string; delivery_status: MessageRow['delivery_status'] }> {
      const conversation = isUuid(id) ? await findConversation(pool, id) : null;
      if (!conversation || conversation.user_id !== userId) throw new PlatformError('conversation_not_found');
      const onChannel = await replyOnChannel?.(conversation.id, text);
      if (onChannel !== undefined) return { id: onChannel, role: 'assistant', content: text, delivery_status: 'pending' };
      if (CHANNEL_TYPES.has(conversation.type)) throw ValidationError.field('message', "This conversation's channel was deleted: nothing can be sent to the customer.");
      const row = await pool.transaction((tx) => insertMessage(tx, { conversationId: conversation.id, role: 'assistant', content: text }));
      logger.info({ conversationId: conversation.id, userId }, 'owner wrote in a conversation');
      return { id: row.id, role: 'assistant', content: text, delivery_status: null };
    },

    /** The owner takes a conversation over by hand (AI off) or hands it back. */
    async setAiEnabled(userId: number, id: string, enabled: boolean) {
      const row = isUuid(id) ? await setAiEnabled(pool, userId, id, enabled) : null;
      if (!row) throw new PlatformError('conversation_not_found');
      return row;
    },

    /**
     * What the public widget of the assistant with this UUID shows before a conversation starts:
     * the owner's default look and the greeting (the initial message with the assistant's
     * variables); null when there is no such assistant.
     */
    async widgetOf(uuid: string): Promise<{ widget: AssistantRow['widget']; greeting: string } | null> {
      const assistant = await findAssistantByUuid(pool, uuid);
      if (!assistant) return null;
      return { widget: assistant.widget, greeting: renderTemplate(assistant.initial_message, assistant.variables).trim() };
    },

    /** Assistant ownership check for the listing filter. */
    /**
     * The integer id of the user's assistant named by its id (digits) or its UUID; null when it is
     * not one of theirs.
     */
    async ownedAssistantId(userId: number, idOrUuid: string): Promise<number | null> {
      const row = isUuid(idOrUuid) ? await findAssistantByUuid(pool, idOrUuid) : await findAssistant(pool, userId, Number(idOrUuid));
      return row && row.user_id === userId ? row.id : null;
    },
  };
}

export type ConversationService = ReturnType<typeof createConversationService>;
