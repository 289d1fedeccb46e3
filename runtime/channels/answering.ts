import type { DatabasePool, DatabaseTransactionConnection } from 'slonik';
import { findAssistantWithTools, type AssistantWithTools } from '../assistants/repository.js';
import { refundMessage, type ConversationEngine } from '../conversations/engine.js';
import { findConversation, insertMessage, type ConversationRow } from '../conversations/repository.js';
import { PlatformError } from '../errors.js';
import { LlmError } from '../llm/types.js';
import type { Logger } from '../logger.js';
import { unreservedBalance } from '../ledger/holds.js';
import { prices } from '../prices.js';
import { datetime } from '../time.js';
import type { ChannelAdapters } from './adapters.js';
import type { Handled } from './inbox.js';
import { InboxLost, inboundMessageOf, lockBalanceNotice, recordInboundMessage, setBalanceNotice, settleInbound, withdrawAttempt, type InboundRow } from './inboxStore.js';
import { enqueueParts } from './outboxStore.js';
import { channelById, channelOfConversation, enqueueAssistantEvent, numberPaidUp, optedOut, setOptedOut, type ChannelRow } from './repository.js';

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
  async function keep(channel: ChannelRow, inbound: InboundRow, owner: string, content: string, notice?: string): Promise<void> {
    await pool.transaction(async (tx) => {
      await insertMessage(tx, { conversationId: inbound.conversation_id, role: 'user', content });
      if (notice) await queueMessage(tx, channel, inbound.conversation_id, inbound.customer, notice);
      await settleInbound(tx, inbound.id, owner);
    });
    if (notice) deps.sent();
  }

  async function noBalance(channel: ChannelRow, conversation: ConversationRow, inbound: InboundRow, owner: string, text: string): Promise<void> {
    const notified = await pool.transaction(async (tx) => {
      const noticed = await lockBalanceNotice(tx, conversation.id);
      await insertMessage(tx, { conversationId: conversation.id, role: 'user', content: text });
      await settleInbound(tx, inbound.id, owner);
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

  /**
   * The assistant answers `text` through the engine; what it saves and queues, and how a failure
   * ends: the model failing is answered with a notice (the charge refunded); anything else (the
   * database failing) is thrown, for the inbox to try the message again.
   */
  async function answer(channel: ChannelRow, conversation: ConversationRow, assistant: AssistantWithTools, inbound: InboundRow, owner: string, text: string): Promise<Handled> {
    try {
      const reply = await deps.engine.send(conversation, assistant, text, {
        chargeOnlyAnswered: true,
        accepted: (tx, messageId) => recordInboundMessage(tx, inbound.id, owner, messageId),
        saved: async (tx, saved) => {
          await settleInbound(tx, inbound.id, owner);
          await enqueueParts(tx, { channelId: channel.id, conversationId: conversation.id, messageId: saved.messageId, recipient: inbound.customer, parts: deps.adapters[channel.type].split(saved.text) });
          await setBalanceNotice(tx, conversation.id, false);
        },
      });
      if (reply.message === null) return 'skipped';
      deps.sent();
      return 'done';
    } catch (error) {
      if (error instanceof PlatformError && error.code === 'insufficient_balance') {
        await noBalance(channel, conversation, inbound, owner, text);
        return 'done';
      }
      if (error instanceof PlatformError && error.code === 'shutting_down') return 'again';
      if (!(error instanceof LlmError)) throw error;
      logger.warn({ err: error, conversationId: conversation.id, channelId: channel.id }, 'channel reply failed');
      await failed(channel, inbound, owner);
      return 'done';
    }
  }

  /** The customer is asked to write again: their message could not be answered. */
  async function failed(channel: ChannelRow, inbound: InboundRow, owner: string, keepMessage = false): Promise<void> {
    await pool.transaction(async (tx) => {
      if (keepMessage) await insertMessage(tx, { conversationId: inbound.conversation_id, role: 'user', content: inbound.body });
      await queueMessage(tx, channel, inbound.conversation_id, inbound.customer, NOTICES.failed);
      await settleInbound(tx, inbound.id, owner);
    });
    deps.sent();
  }

  async function handle(inbound: InboundRow, owner: string): Promise<Handled> {
    try {
      return await handleHeld(inbound, owner);
    } catch (error) {
      // Another process holds the conversation now, and answers the message: nothing is left to do here.
      if (error instanceof InboxLost) return 'lost';
      throw error;
    }
  }

  async function handleHeld(inbound: InboundRow, owner: string): Promise<Handled> {
    const [conversation, channel] = await Promise.all([findConversation(pool, inbound.conversation_id), channelById(pool, inbound.channel_id)]);
    if (!conversation || !channel) return 'skipped';
    if (inbound.message_id !== null) {
      const stored = inbound.message_id;
      const withdrawn = await pool.transaction((tx) => withdrawAttempt(tx, stored, conversation.user_id, (message) => refundMessage(tx, message, 'Answered again after a stop')));
      // The earlier attempt's turn still holds the conversation: it is waited for (the inbox is given up, and taken up again by a sweep).
      if (!withdrawn) return 'again';
    }
    const assistant = conversation.assistant_id === null ? null : await findAssistantWithTools(pool, conversation.user_id, conversation.assistant_id);
    // The do-not-call list speaks for SMS (STOP and START); WhatsApp customers block a business in WhatsApp itself.
    const out = channel.type === 'sms' && (await optedOut(pool, conversation.user_id, inbound.customer));
    // A rented number that lapsed unpaid answers nothing (as for its calls): its messages wait in the history for the owner.
    const lapsed = channel.phone_number_id !== null && !(await numberPaidUp(pool, channel.phone_number_id));
    // START (or YES, UNSTOP) opts a customer who opted out back in; from anyone else it is words for the assistant.
    if (inbound.kind === 'stop' || (inbound.kind === 'start' && out)) {
      await pool.transaction(async (tx) => {
        await setOptedOut(tx, conversation.user_id, inbound.customer, inbound.kind === 'stop');
        await insertMessage(tx, { conversationId: conversation.id, role: 'user', content: inbound.body });
        await settleInbound(tx, inbound.id, owner);
      });
      logger.info({ conversationId: conversation.id, channelId: channel.id, keyword: inbound.kind }, 'customer opt-out keyword honoured');
      return 'done';
    }
    const words = inbound.kind === 'text' || inbound.kind === 'start';
    // Kept with no answer: no assistant, an opted-out number, a lapsed number, HELP (Twilio answers
    // it itself), a reaction or anything else that asks nothing, and every message while AI is off.
    if (!assistant || out || lapsed || inbound.kind === 'help' || (!words && !NOTICE_KINDS.has(inbound.kind)) || !conversation.ai_enabled || (words && !inbound.body.trim())) {
      await keep(channel, inbound, owner, inbound.body);
      return 'done';
    }
    void deps.adapters[channel.type].markRead?.(channel, inbound.external_id).catch((error: unknown) => logger.warn({ err: error, channelId: channel.id }, 'a message could not be marked read'));
    if (words) return answer(channel, conversation, assistant, inbound, owner, inbound.body);
    // A voice note is transcribed (at the platform's cost) only when its answer can be paid for.
    if (inbound.kind === 'audio' && (await unreservedBalance(pool, conversation.user_id)) < prices.conversationMessage[conversation.type]) {
      await noBalance(channel, conversation, inbound, owner, inbound.body);
      return 'done';
    }
    const text = inbound.kind === 'audio' ? await transcript(channel, assistant, inbound) : undefined;
    if (text === undefined) {
      await keep(channel, inbound, owner, inbound.body, NOTICES.notText);
      return 'done';
    }
    return answer(channel, conversation, assistant, inbound, owner, text);
  }

  return {
    handle,

    /**
     * A message whose handling kept failing unexpectedly is passed over: it is kept in the history
     * (uncharged) and the customer is asked to write again. @throws InboxLost, or the database's error
     */
    async giveUp(inbound: InboundRow, owner: string): Promise<void> {
      const [channel, stored] = await Promise.all([channelById(pool, inbound.channel_id), inboundMessageOf(pool, inbound.id)]);
      if (channel) await failed(channel, inbound, owner, stored === null);
    },

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
