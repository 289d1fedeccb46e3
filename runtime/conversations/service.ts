import type { DatabasePool } from 'slonik';
import { findAssistant, findAssistantByUuid, findAssistantWithTools, type AssistantWithTools } from '../assistants/repository.js';
import { PlatformError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import { prices, type ConversationType } from '../prices.js';
import { isUuid } from '../../schemas/rules.js';
import { datetime } from '../time.js';
import { failureReason, renderTemplate, type ConversationEngine } from './engine.js';
import { userBalance } from '../users/repository.js';
import {
  findConversation,
  insertConversation,
  insertMessage,
  listConversations,
  listMessages,
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
}

export function historyOf(rows: readonly MessageRow[]): HistoryMessage[] {
  return rows.map((row) => ({ role: row.role, content: row.content, ...(row.function_calls?.length ? { function_calls: row.function_calls } : {}) }));
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

export function createConversationService({ pool, engine, logger }: { pool: DatabasePool; engine: ConversationEngine; logger: Logger }) {
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
     * a balance of at least one message.
     */
    async create(input: { assistantUuid: string; type: ConversationType; variables: Record<string, unknown>; callerId: number | undefined }) {
      const assistant = await findAssistantByUuid(pool, input.assistantUuid);
      if (!assistant) throw new PlatformError('assistant_not_found');
      if (OWNER_ONLY_TYPES.has(input.type) && input.callerId !== assistant.user_id) {
        throw ValidationError.field('type', `The ${input.type} type needs the API key or session token of the assistant owner.`);
      }
      const price = prices.conversationMessage[input.type];
      if (price > 0 && (await userBalance(pool, assistant.user_id)) < price) throw new PlatformError('insufficient_balance');
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
     * @throws PlatformError `conversation_not_found`, `assistant_not_found`, `insufficient_balance`,
     *   `provider_failed` (502, "Failed to process message: <reason>"; the user message is kept, the charge refunded).
     */
    async send(id: string, text: string) {
      const { conversation, assistant } = await conversationAndAssistant(id);
      try {
        return await engine.send(conversation, assistant, text);
      } catch (error) {
        if (error instanceof PlatformError) throw error;
        logger.warn({ err: error, conversationId: id }, 'reply failed');
        throw new PlatformError('provider_failed', { message: `Failed to process message: ${failureReason(error)}`, cause: error });
      }
    },

    async history(id: string): Promise<HistoryMessage[]> {
      const conversation = isUuid(id) ? await findConversation(pool, id) : null;
      if (!conversation) throw new PlatformError('conversation_not_found');
      return historyOf(await listMessages(pool, id));
    },

    /** Checks a conversation exists (for sockets); returns it. */
    async find(id: string): Promise<ConversationRow> {
      return (await conversationAndAssistant(id)).conversation;
    },

    async list(userId: number, filters: ConversationFilters, page: number, perPage: number) {
      const { items, total } = await listConversations(pool, userId, filters, page, perPage);
      return { items: items.map(listItem), total, page, perPage };
    },

    /** The owner takes a conversation over by hand (AI off) or hands it back. */
    async setAiEnabled(userId: number, id: string, enabled: boolean) {
      const row = isUuid(id) ? await setAiEnabled(pool, userId, id, enabled) : null;
      if (!row) throw new PlatformError('conversation_not_found');
      return row;
    },

    /** Whether an assistant with this public UUID exists (the widget page). */
    async assistantExists(uuid: string): Promise<boolean> {
      return (await findAssistantByUuid(pool, uuid)) !== null;
    },

    /** Assistant ownership check for the listing filter. */
    async assistantOwned(userId: number, assistantId: number): Promise<boolean> {
      return (await findAssistant(pool, userId, assistantId)) !== null;
    },
  };
}

export type ConversationService = ReturnType<typeof createConversationService>;
