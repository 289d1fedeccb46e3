import { EventEmitter } from 'node:events';
import type { DatabasePool } from 'slonik';
import type { Logger } from '../logger.js';
import { listenTo } from '../store/notifications.js';
import type { TurnResult } from './machine.js';
import { MESSAGES_CHANNEL, lastMessageId, recentMessages } from './repository.js';

export type ConversationEvent =
  | { type: 'delta'; text: string }
  | { type: 'function_call'; name: string; arguments: Record<string, unknown>; result: unknown }
  | { type: 'message'; id: number; role: 'user' | 'assistant'; content: string; function_calls: TurnResult['function_calls'] }
  /** A turn began answering (`active`), or ended without a reply; a stored reply ends it too. */
  | { type: 'typing'; active: boolean }
  | { type: 'error'; error: string };

/**
 * An event as a visitor (anyone but the conversation's owner; the widget socket) may see it: the
 * user's and the assistant's words, streamed or stored. Function calls, with their arguments and
 * results (knowledge passages, the answers of the owner's endpoints), are the owner's alone: their
 * events are not shown, and stored messages carry `function_calls: []`.
 * @returns undefined for an event a visitor does not see.
 */
export function visitorEvent(event: ConversationEvent): ConversationEvent | undefined {
  if (event.type === 'function_call') return undefined;
  if (event.type === 'message' && event.function_calls.length > 0) return { ...event, function_calls: [] };
  return event;
}

/** Ids remembered per watched conversation (a turn stores two messages; many more never arrive at once). */
const RECENT_IDS = 256;

/**
 * Where a conversation's sockets are in this process, and what each has been sent.
 *
 * Stored messages reach every socket on their conversation, whichever process stored them: this
 * process's turns `deliver` them as they are saved, and a notification (MESSAGES_CHANNEL) brings the
 * others' from the database. Per conversation with sockets here: the last message stored before
 * the first socket came (`since`, read once), and the ids sent to them lately, so each message
 * goes out once whichever way comes first, and one that commits after a later id is not skipped.
 * Deltas and function calls (`emit`) stream only from the process running the turn.
 * @param databaseUrl the database the pool is of: without it, only this process's messages are heard.
 */
export function createConversationFanout(pool: DatabasePool, databaseUrl: string | undefined, logger: Logger) {
  const events = new EventEmitter();
  events.setMaxListeners(0);

  interface Watched {
    since: Promise<number> | undefined;
    readonly sent: Set<number>;
  }
  const watched = new Map<string, Watched>();
  const catchUps = new Map<string, Promise<void>>();

  const emit = (conversationId: string, event: ConversationEvent): void => void events.emit(conversationId, event);

  /** Sends a stored message to the conversation's sockets here, unless they already had it. */
  function deliver(conversationId: string, messageId: number, event: Extract<ConversationEvent, { type: 'message' }>): void {
    const watch = watched.get(conversationId);
    if (watch) {
      if (watch.sent.has(messageId)) return;
      watch.sent.add(messageId);
      if (watch.sent.size > RECENT_IDS) watch.sent.delete(watch.sent.values().next().value!);
    }
    emit(conversationId, event);
  }

  function watch(conversationId: string): void {
    if (!notifications || watched.has(conversationId)) return;
    const entry: Watched = { since: undefined, sent: new Set() };
    watched.set(conversationId, entry);
    void readSince(conversationId, entry).catch(() => undefined);
  }

  /** Where the conversation stood when its first socket here came; a failed read is tried again by the next catch-up. */
  function readSince(conversationId: string, entry: Watched): Promise<number> {
    const since = lastMessageId(pool, conversationId);
    entry.since = since;
    since.catch((error: unknown) => {
      logger.warn({ err: error, conversationId }, 'the last message of a conversation could not be read');
      if (entry.since === since) entry.since = undefined;
    });
    return since;
  }

  /** Sends this process's sockets on the conversation what other processes stored (and they were not sent). */
  function catchUp(conversationId: string): void {
    if (!watched.has(conversationId)) return;
    const next = (catchUps.get(conversationId) ?? Promise.resolve())
      .then(async () => {
        const entry = watched.get(conversationId);
        if (!entry) return;
        const since = await (entry.since ?? readSince(conversationId, entry));
        for (const message of await recentMessages(pool, conversationId, since)) {
          deliver(conversationId, message.id, { type: 'message', id: message.id, role: message.role, content: message.content, function_calls: message.function_calls ?? [] });
        }
      })
      .catch((error: unknown) => logger.warn({ err: error, conversationId }, 'messages of another process could not be read'))
      .finally(() => {
        if (catchUps.get(conversationId) === next) catchUps.delete(conversationId);
      });
    catchUps.set(conversationId, next);
  }

  const notifications = databaseUrl
    ? listenTo(databaseUrl, MESSAGES_CHANNEL, {
        notified: (payload) => {
          const [conversationId = '', messageId] = payload.split(' ');
          // A message this process stored and already sent its sockets needs no reading back.
          if (!watched.get(conversationId)?.sent.has(Number(messageId))) catchUp(conversationId);
        },
        // Back after a lost connection: whatever was stored meanwhile.
        listening: () => {
          for (const conversationId of watched.keys()) catchUp(conversationId);
        },
      }, logger)
    : undefined;

  return {
    emit,
    deliver,

    /** Streams events of a conversation to `listener`; returns the unsubscribe function. */
    subscribe(conversationId: string, listener: (event: ConversationEvent) => void): () => void {
      events.on(conversationId, listener);
      // The first socket here: messages from now on, this process's or another's, go to it once.
      watch(conversationId);
      return () => {
        events.off(conversationId, listener);
        if (events.listenerCount(conversationId) === 0) watched.delete(conversationId);
      };
    },

    /**
     * Resolves once this process knows where a conversation its sockets watch stood when the first
     * of them came (messages stored after that reach them); at once if no socket here watches it.
     */
    async watching(conversationId: string): Promise<void> {
      await watched.get(conversationId)?.since?.catch(() => undefined);
    },

    /** Whether any socket here watches the conversation. */
    watched(conversationId: string): boolean {
      return events.listenerCount(conversationId) > 0;
    },

    async close(): Promise<void> {
      await notifications?.close();
    },
  };
}

export type ConversationFanout = ReturnType<typeof createConversationFanout>;
