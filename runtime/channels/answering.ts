import type { DatabasePool, DatabaseTransactionConnection } from 'slonik';
import { findAssistantWithTools, type AssistantWithTools } from '../assistants/repository.js';
import { refundMessage, type ConversationEngine } from '../conversations/engine.js';
import { findConversation, insertMessage, type ConversationRow } from '../conversations/repository.js';
import { PlatformError } from '../errors.js';
import type { Logger } from '../logger.js';
import { unreservedBalance } from '../ledger/holds.js';
import { prices } from '../prices.js';
import { datetime } from '../time.js';
import type { ChannelAdapters } from './adapters.js';
import type { Handled } from './inbox.js';
import { answerInbound, lockBalanceNotice, markInboundDone, recordInboundMessage, setBalanceNotice, withdrawAttempt, type InboundRow } from './inboxStore.js';
import { enqueueParts } from './outboxStore.js';
import { channelById, channelOfConversation, enqueueAssistantEvent, optedOut, setOptedOut, type ChannelRow } from './repository.js';

/**
 * How a channel's customer message is answered: by the assistant through the conversation engine
 * (same tools, knowledge, variables and charge as the widget), or by a notice when it cannot be:
 * a message that is not text, a balance too low (once per conversation until an answer goes out
 * again, with the owner's `conversation.insufficient_balance` webhook), a reply that failed. STOP
 * and START put the number on and off the owner's do-not-contact list; a number on it gets no
 * reply. With AI off, messages are kept for the owner to answer (`reply`). Whatever goes to the
 * customer is stored in the history and queued in the outbox in one transaction.
 */

export const NOTICES = {
  notText: 'I can only read text messages. Please write your message as text.',
  noBalance: "Sorry, we can't answer messages right now. Please try again later.",
  failed: "Sorry, I couldn't answer that just now. Please send your message again in a moment.",
} as const;

/** The longest audio message transcribed (WhatsApp voice notes are far smaller). */
const MAX_AUDIO_BYTES = 16 * 1024 * 1024;

export interface AnsweringDeps {
  readonly pool: DatabasePool;
  readonly engine: ConversationEngine;
  readonly adapters: ChannelAdapters;
  readonly logger: Logger;
  /** A message was queued in the outbox. */
  readonly sent: () => void;
  /** A webhook delivery was queued. */
  readonly notified: () => void;
  /** The assistant's transcriber's text of an audio message; undefined when it has none. */
  readonly transcribe?: (assistant: AssistantWithTools, audio: { bytes: Buffer; mimeType: string }) => Promise<string | undefined>;
}

export function createAnswering(deps: AnsweringDeps) {
  const { pool, logger } = deps;

  /** Stores an assistant-side message (a reply, a notice, the owner's words) and queues it on the channel. */
  async function queueMessage(tx: DatabaseTransactionConnection, channel: ChannelRow, conversationId: string, customer: string, text: string): Promise<number> {
    const message = await insertMessage(tx, { conversationId, role: 'assistant', content: text });
    await enqueueParts(tx, { channelId: channel.id, conversationId, messageId: message.id, recipient: customer, parts: deps.adapters[channel.type].split(text) });
    return message.id;
  }

  /** Keeps the customer's message with no reply (and no charge), and optionally a notice after it. */
  async function keep(channel: ChannelRow, inbound: InboundRow, content: string, notice?: string): Promise<void> {
    await pool.transaction(async (tx) => {
      await insertMessage(tx, { conversationId: inbound.conversation_id, role: 'user', content });
      if (notice) await queueMessage(tx, channel, inbound.conversation_id, inbound.customer, notice);
      await markInboundDone(tx, inbound.id);
    });
    if (notice) deps.sent();
  }

  async function noBalance(channel: ChannelRow, conversation: ConversationRow, inbound: InboundRow, text: string): Promise<void> {
    const notified = await pool.transaction(async (tx) => {
      const noticed = await lockBalanceNotice(tx, conversation.id);
      await insertMessage(tx, { conversationId: conversation.id, role: 'user', content: text });
      await markInboundDone(tx, inbound.id);
      if (noticed) return false;
      await queueMessage(tx, channel, conversation.id, inbound.customer, NOTICES.noBalance);
      await setBalanceNotice(tx, conversation.id, true);
      return enqueueAssistantEvent(tx, channel.assistant_id, 'conversation.insufficient_balance', {
        conversation_id: conversation.id,
        assistant_id: channel.assistant_id,
        channel_id: channel.id,
        channel: channel.type,
        customer_phone: inbound.customer,
        created_at: datetime(new Date().toISOString()),
      }).then(() => true);
    });
    if (notified) {
      deps.sent();
      deps.notified();
      logger.warn({ conversationId: conversation.id, userId: conversation.user_id, channelId: channel.id }, 'channel message left unanswered: insufficient balance');
    }
  }

  /** Kinds that get the text-only notice when they carry no words (and, for audio, no transcript). */
  const NOTICE_KINDS = new Set(['audio', 'image', 'video', 'document', 'sticker', 'location', 'contacts', 'media']);

  /** The words of an audio message, from the assistant's transcriber; undefined when there are none. */
  async function transcript(channel: ChannelRow, assistant: AssistantWithTools, inbound: InboundRow): Promise<string | undefined> {
    const mediaId = typeof inbound.media?.id === 'string' ? inbound.media.id : undefined;
    const fetchMedia = deps.adapters[channel.type].media;
    if (!deps.transcribe || !mediaId || !fetchMedia) return undefined;
    try {
      const audio = await fetchMedia(channel, mediaId, MAX_AUDIO_BYTES);
      return (await deps.transcribe(assistant, audio))?.trim() || undefined;
    } catch (error) {
      logger.warn({ err: error, conversationId: inbound.conversation_id }, 'an audio message could not be transcribed');
      return undefined;
    }
  }

  /** The assistant answers `text` through the engine; what it saves and queues, and how a failure ends. */
  async function answer(channel: ChannelRow, conversation: ConversationRow, assistant: AssistantWithTools, inbound: InboundRow, text: string): Promise<Handled> {
    try {
      const reply = await deps.engine.send(conversation, assistant, text, {
        accepted: (tx, messageId) => recordInboundMessage(tx, inbound.id, messageId),
        saved: async (tx, saved) => {
          await answerInbound(tx, inbound.id);
          await enqueueParts(tx, { channelId: channel.id, conversationId: conversation.id, messageId: saved.messageId, recipient: inbound.customer, parts: deps.adapters[channel.type].split(saved.text) });
          await setBalanceNotice(tx, conversation.id, false);
        },
      });
      if (reply.message === null) return 'skipped';
      deps.sent();
      return 'done';
    } catch (error) {
      if (error instanceof PlatformError && error.code === 'insufficient_balance') {
        await noBalance(channel, conversation, inbound, text);
        return 'done';
      }
      if (error instanceof PlatformError && error.code === 'shutting_down') return 'again';
      logger.warn({ err: error, conversationId: conversation.id, channelId: channel.id }, 'channel reply failed');
      await pool.transaction(async (tx) => {
        await queueMessage(tx, channel, conversation.id, inbound.customer, NOTICES.failed);
        await markInboundDone(tx, inbound.id);
      });
      deps.sent();
      return 'done';
    }
  }

  async function handle(inbound: InboundRow): Promise<Handled> {
    const [conversation, channel] = await Promise.all([findConversation(pool, inbound.conversation_id), channelById(pool, inbound.channel_id)]);
    if (!conversation || !channel) return 'skipped';
    if (inbound.message_id !== null) {
      const stored = inbound.message_id;
      await pool.transaction((tx) => withdrawAttempt(tx, stored, conversation.user_id, (message) => refundMessage(tx, message, 'Answered again after a stop')));
    }
    const assistant = conversation.assistant_id === null ? null : await findAssistantWithTools(pool, conversation.user_id, conversation.assistant_id);
    // The do-not-call list speaks for SMS (STOP and START); WhatsApp customers block a business in WhatsApp itself.
    const out = channel.type === 'sms' && (await optedOut(pool, conversation.user_id, inbound.customer));
    // START (or YES, UNSTOP) opts a customer who opted out back in; from anyone else it is words for the assistant.
    if (inbound.kind === 'stop' || (inbound.kind === 'start' && out)) {
      await pool.transaction(async (tx) => {
        await setOptedOut(tx, conversation.user_id, inbound.customer, inbound.kind === 'stop');
        await insertMessage(tx, { conversationId: conversation.id, role: 'user', content: inbound.body });
        await markInboundDone(tx, inbound.id);
      });
      logger.info({ conversationId: conversation.id, channelId: channel.id, keyword: inbound.kind }, 'customer opt-out keyword honoured');
      return 'done';
    }
    const words = inbound.kind === 'text' || inbound.kind === 'start';
    // Kept with no answer: no assistant, an opted-out number, HELP (Twilio answers it itself), a
    // reaction or anything else that asks nothing, and every message while AI is off.
    if (!assistant || out || inbound.kind === 'help' || (!words && !NOTICE_KINDS.has(inbound.kind)) || !conversation.ai_enabled || (words && !inbound.body.trim())) {
      await keep(channel, inbound, inbound.body);
      return 'done';
    }
    void deps.adapters[channel.type].markRead?.(channel, inbound.external_id).catch((error: unknown) => logger.warn({ err: error, channelId: channel.id }, 'a message could not be marked read'));
    if (words) return answer(channel, conversation, assistant, inbound, inbound.body);
    // A voice note is transcribed (at the platform's cost) only when its answer can be paid for.
    if (inbound.kind === 'audio' && (await unreservedBalance(pool, conversation.user_id)) < prices.conversationMessage[conversation.type]) {
      await noBalance(channel, conversation, inbound, inbound.body);
      return 'done';
    }
    const text = inbound.kind === 'audio' ? await transcript(channel, assistant, inbound) : undefined;
    if (text === undefined) {
      await keep(channel, inbound, inbound.body, NOTICES.notText);
      return 'done';
    }
    return answer(channel, conversation, assistant, inbound, text);
  }

  return {
    handle,

    /**
     * The owner writes in a channel conversation as a human agent: stored in the history and sent
     * on its channel. @returns the message's id, or undefined when the conversation has no channel.
     */
    async reply(conversationId: string, text: string): Promise<number | undefined> {
      const target = await channelOfConversation(pool, conversationId);
      if (!target) return undefined;
      const id = await pool.transaction((tx) => queueMessage(tx, target.channel, conversationId, target.customer, text));
      deps.sent();
      return id;
    },
  };
}

export type Answering = ReturnType<typeof createAnswering>;
