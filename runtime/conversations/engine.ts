import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DatabasePool, DatabaseTransactionConnection } from 'slonik';
import { createActor, fromPromise, type ActorRefFrom } from 'xstate';
import type { AssistantRow, AssistantWithTools } from '../assistants/repository.js';
import { within } from '../bounded.js';
import type { CatalogService } from '../catalog/service.js';
import { PlatformError } from '../errors.js';
import type { KnowledgeService } from '../knowledge/service.js';
import { postLedgerEntry } from '../ledger/service.js';
import type { LlmRegistry } from '../llm/registry.js';
import { LlmError, type ChatMessage, type LlmProvider } from '../llm/types.js';
import type { Logger } from '../logger.js';
import type { OutboundFetch } from '../net/outbound.js';
import { prices } from '../prices.js';
import { listAssistantTools } from '../tools/repository.js';
import { conversationMachine, type ActOutput, type ConversationSetup, type Job, type ThinkOutput, type TurnResult, type Turn } from './machine.js';
import { listenTo } from '../store/notifications.js';
import {
  MESSAGES_CHANNEL,
  clearMessageCost,
  holdTurn,
  insertMessage,
  lastMessageId,
  listMessages,
  lockConversation,
  lockUnanswered,
  recentMessages,
  settleReply,
  unansweredMessages,
  type ConversationRow,
  type MessageRow,
} from './repository.js';
import { parseArguments, runFunction } from '../agent/functions.js';
import { toolFunction } from '../agent/httpTools.js';
import { SEARCH_FUNCTION, knowledgeSection } from '../agent/knowledge.js';
import { renderTemplate } from '../agent/prompts.js';
import { MAX_TOOL_ROUNDS, streamRound } from '../agent/round.js';

/**
 * Runs conversation actors: builds each one's setup from the database, supplies the machine's
 * I/O actors, keeps live actors in a registry (evicted when idle, rebuilt on the next message), and
 * fans streaming events out to every socket watching the conversation.
 */

export type ConversationEvent =
  | { type: 'delta'; text: string }
  | { type: 'function_call'; name: string; arguments: Record<string, unknown>; result: unknown }
  | { type: 'message'; role: 'user' | 'assistant'; content: string; function_calls: TurnResult['function_calls'] }
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

export interface EngineDeps {
  readonly pool: DatabasePool;
  /** The database the pool is of: with it, sockets here hear of messages stored by other processes. */
  readonly databaseUrl?: string;
  readonly catalog: CatalogService;
  readonly llm: LlmRegistry;
  readonly knowledge: KnowledgeService;
  readonly outbound: OutboundFetch;
  readonly logger: Logger;
  /** Idle time after which an actor is dropped from memory. @defaultValue 10 minutes */
  readonly idleMs?: number;
  /**
   * The longest a reply may take, model rounds and tools together: a model that keeps trickling
   * tokens (each within the stall limit) cannot hold the conversation's queue for ever.
   * @defaultValue 3 minutes
   */
  readonly turnMs?: number;
  /**
   * A turn holds its conversation this long, renewed every third of it while the turn runs; a
   * stopped process's turn lapses after it. @defaultValue 60 s
   */
  readonly turnLeaseSeconds?: number;
}

/**
 * Takes back the charge of a message still owed its reply: off the conversation and into the
 * ledger, once (a turn's own refund and the sweep may both try). @returns whether it refunded.
 */
async function refundMessage(tx: DatabaseTransactionConnection, message: { conversationId: string; messageId: number; userId: number; cost: number }, reason: string): Promise<boolean> {
  if (!(await lockUnanswered(tx, message.messageId))) return false;
  await clearMessageCost(tx, message.conversationId, message.messageId, message.cost);
  if (message.cost > 0) await postLedgerEntry(tx, { userId: message.userId, amount: message.cost, kind: 'conversation_refund', reference: String(message.messageId), reason });
  return true;
}

/** Function calls run per model round; more in one round get an error result instead. */
const MAX_CALLS_PER_ROUND = 8;


const historyOf = (messages: readonly MessageRow[]): ChatMessage[] => messages.map((m) => ({ role: m.role, content: m.content }));

/** At a stop, turns cut short get this long to refund their messages. */
const STOP_TURNS_MS = 10_000;

/** A charged message with no reply after this long is refunded (a turn never takes nearly so long). */
export const UNANSWERED_AFTER_SECONDS = 15 * 60;

export function createConversationEngine(deps: EngineDeps) {
  const { pool, logger } = deps;
  const idleMs = deps.idleMs ?? 10 * 60 * 1000;
  const turnMs = deps.turnMs ?? 3 * 60 * 1000;
  const TURN_LEASE_SECONDS = deps.turnLeaseSeconds ?? 60;
  const overdue = () => new LlmError(`the reply was not done within ${turnMs / 1000} s`, false);
  /** A message waits this long at most for another process's turn on its conversation. */
  const waitForTurnMs = turnMs + 2 * TURN_LEASE_SECONDS * 1000;
  /** The turn this process holds per conversation (its actor runs one at a time): owner id and lease heartbeat. */
  const turns = new Map<string, { owner: string; heartbeat: NodeJS.Timeout }>();
  let stopped = false;
  /** A stop has begun: no new message is taken; turns under way go on until `stop` cuts them short. */
  let draining = false;
  /** Aborted by `stop`: turns still running give up (and refund) instead of holding the stop. */
  const stopping = new AbortController();
  const shuttingDown = () => new PlatformError('shutting_down', { headers: { 'Retry-After': '5' } });
  /** Messages queued or being answered, over every actor. */
  let busy = 0;
  const quietWaiters: Array<() => void> = [];

  function holdingTurn(conversationId: string, owner: string): void {
    const heartbeat = setInterval(() => {
      holdTurn(pool, conversationId, owner, TURN_LEASE_SECONDS).catch((error: unknown) => logger.warn({ err: error, conversationId }, 'could not renew the turn'));
    }, (TURN_LEASE_SECONDS * 1000) / 3);
    heartbeat.unref();
    turns.set(conversationId, { owner, heartbeat });
  }

  /** Stops renewing this process's turn; returns its owner id (for the statement that ends it). */
  function leavingTurn(conversationId: string): string | undefined {
    const turn = turns.get(conversationId);
    if (!turn) return undefined;
    clearInterval(turn.heartbeat);
    turns.delete(conversationId);
    return turn.owner;
  }
  const events = new EventEmitter();
  events.setMaxListeners(0);

  interface Live {
    readonly actor: ActorRefFrom<typeof conversationMachine>;
    /** The assistant's settings and tools it was built from (see `versionOf`). */
    readonly version: string;
    lastUsed: number;
    busy: number;
  }
  const live = new Map<string, Live>();
  const starting = new Map<string, Promise<Live>>();

  const emit = (conversationId: string, event: ConversationEvent): void => void events.emit(conversationId, event);

  /**
   * Stored messages reach every socket on their conversation, whichever process stored them: this
   * process's turns emit them as they are saved, and a notification (MESSAGES_CHANNEL) brings the
   * others' from the database. Per conversation with sockets here: the last message stored before
   * the first socket came (`since`, read once), and the ids sent to them lately, so each message
   * goes out once whichever way comes first, and one that commits after a later id is not skipped.
   * (Deltas and function calls stream only from the process running the turn.)
   */
  interface Watched {
    since: Promise<number> | undefined;
    readonly sent: Set<number>;
  }
  const watched = new Map<string, Watched>();
  const catchUps = new Map<string, Promise<void>>();
  /** Ids remembered per watched conversation (a turn stores two messages; many more never arrive at once). */
  const RECENT_IDS = 256;

  function deliver(conversationId: string, messageId: number, event: ConversationEvent): void {
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
          deliver(conversationId, message.id, { type: 'message', role: message.role, content: message.content, function_calls: message.function_calls ?? [] });
        }
      })
      .catch((error: unknown) => logger.warn({ err: error, conversationId }, 'messages of another process could not be read'))
      .finally(() => {
        if (catchUps.get(conversationId) === next) catchUps.delete(conversationId);
      });
    catchUps.set(conversationId, next);
  }

  const notifications = deps.databaseUrl
    ? listenTo(deps.databaseUrl, MESSAGES_CHANNEL, {
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

  async function model(id: number | null): Promise<{ provider: LlmProvider; model: string } | undefined> {
    if (id === null) return undefined;
    const row = (await deps.catalog.get()).models.get(id);
    if (!row) return undefined;
    return { provider: deps.llm.provider(row.provider), model: row.code };
  }

  /** The text model of an assistant: its LLM in pipeline mode, else its fallback, else the first catalog LLM. */
  async function textModel(assistant: AssistantRow) {
    const catalog = await deps.catalog.get();
    const id = assistant.mode === 'pipeline' ? assistant.llm_model_id : assistant.chat_llm_fallback_id ?? catalog.modelsOfType('llm')[0]?.id ?? null;
    return (await model(id)) ?? { provider: deps.llm.provider('dev'), model: 'dev' };
  }

  /** What a live conversation's actor depends on: the assistant's settings, which tools it has, and their settings. */
  function versionOf(assistant: AssistantWithTools): string {
    return `${assistant.updated_at}|${assistant.tool_ids.join(',')}|${assistant.tools_version}`;
  }

  async function load(conversation: ConversationRow, assistant: AssistantRow, version: string): Promise<Live> {
    const tools = await listAssistantTools(pool, assistant.id);
    const variables = { ...assistant.variables, ...conversation.variables };
    const functions = tools.map(toolFunction);
    const kbId = assistant.knowledgebase_id ?? undefined;
    if (kbId !== undefined && assistant.knowledgebase_mode === 'function_call') functions.push(SEARCH_FUNCTION);
    const history: ChatMessage[] = historyOf(await listMessages(pool, conversation.id));
    const setup: ConversationSetup = {
      conversationId: conversation.id,
      ownerId: conversation.user_id,
      price: prices.conversationMessage[conversation.type],
      llm: await textModel(assistant),
      fallback: assistant.mode === 'pipeline' && assistant.chat_llm_fallback_id !== null ? await model(assistant.chat_llm_fallback_id) : undefined,
      temperature: assistant.llm_temperature,
      systemPrompt: renderTemplate(assistant.system_prompt, variables),
      functions,
      promptKnowledgebaseId: kbId !== undefined && assistant.knowledgebase_mode === 'prompt' ? kbId : undefined,
      history,
    };

    const machine = conversationMachine.provide({
      actors: {
        accept: fromPromise(async ({ input }: { input: { setup: ConversationSetup; job: Job } }) => {
          const { setup: s, job } = input;
          let accepted: { messageId: number; aiEnabled: boolean } | undefined;
          const owner = randomUUID();
          const waitUntil = Date.now() + waitForTurnMs;
          for (let waitMs = 25; ; waitMs = Math.min(waitMs * 2, 500)) {
            if (stopped) throw shuttingDown();
            accepted = await pool.transaction(async (tx) => {
              const state = await lockConversation(tx, s.conversationId);
              // Another process is answering this conversation: its turn comes first.
              if (state.turn_busy) return undefined;
              // Messages this actor has not seen (written by another process) join its history.
              if (state.message_count !== s.history.length) s.history.splice(0, s.history.length, ...historyOf(await listMessages(tx, s.conversationId)));
              const message = await insertMessage(tx, {
                conversationId: s.conversationId,
                role: 'user',
                content: job.text,
                cost: s.price,
                replyPending: state.ai_enabled && s.price > 0,
                turn: state.ai_enabled ? { takes: owner, seconds: TURN_LEASE_SECONDS } : undefined,
              });
              if (s.price > 0) {
                await postLedgerEntry(tx, { userId: s.ownerId, amount: -s.price, kind: 'conversation_message', reference: String(message.id), reason: `Message in conversation ${s.conversationId}` });
              }
              return { messageId: message.id, aiEnabled: state.ai_enabled };
            });
            if (accepted) break;
            if (Date.now() > waitUntil) throw new LlmError('another reply in this conversation is still being written', true);
            await sleep(waitMs);
          }
          if (accepted.aiEnabled) holdingTurn(s.conversationId, owner);
          deliver(s.conversationId, accepted.messageId, { type: 'message', role: 'user', content: job.text, function_calls: [] });
          let systemPrompt = s.systemPrompt;
          if (accepted.aiEnabled && s.promptKnowledgebaseId !== undefined) {
            const passages = await deps.knowledge.search(s.ownerId, s.promptKnowledgebaseId, job.text, 3).catch(() => []);
            if (passages.length > 0) systemPrompt += `\n\n${knowledgeSection(passages)}`;
          }
          return { messageId: accepted.messageId, charged: s.price, aiEnabled: accepted.aiEnabled, systemPrompt, deadline: Date.now() + turnMs };
        }),

        think: fromPromise(async ({ input }: { input: { setup: ConversationSetup; turn: Turn } }): Promise<ThinkOutput> => {
          const { setup: s, turn } = input;
          const overtime = AbortSignal.timeout(Math.max(1, turn.deadline - Date.now()));
          const deadline = AbortSignal.any([overtime, stopping.signal]);
          const round = streamRound(
            {
              signal: deadline,
              llm: s.llm,
              fallback: s.fallback,
              messages: turn.messages,
              functions: turn.rounds >= MAX_TOOL_ROUNDS ? [] : s.functions,
              temperature: s.temperature,
              onDelta: (delta) => emit(s.conversationId, { type: 'delta', text: delta }),
            },
            logger,
            { conversationId: s.conversationId },
          );
          const result = await round.catch((error: unknown) => {
            throw stopping.signal.aborted ? shuttingDown() : deadline.aborted ? overdue() : error;
          });
          if (stopping.signal.aborted) throw shuttingDown();
          if (deadline.aborted) throw overdue();
          return { text: result.text, calls: [...result.calls] };
        }),

        act: fromPromise(async ({ input }: { input: { setup: ConversationSetup; turn: Turn } }): Promise<ActOutput> => {
          const { setup: s, turn } = input;
          // The tools as they are now: one removed or changed since the actor was built (it is
          // rebuilt only between turns) is not called with what it used to be.
          const current = new Map((await listAssistantTools(pool, assistant.id)).map((tool) => [tool.name, tool]));
          const context = { ownerId: s.ownerId, tools: current, knowledgebaseId: kbId, knowledge: deps.knowledge, outbound: deps.outbound, fallbackQuery: turn.job.text };
          const results = [];
          for (const [index, call] of turn.pending.entries()) {
            if (stopping.signal.aborted) throw shuttingDown();
            if (Date.now() >= turn.deadline) throw overdue();
            const args = parseArguments(call.arguments);
            // Every call gets its answer (the model expects one per call), but only so many run.
            const result = index < MAX_CALLS_PER_ROUND ? await runFunction(call.name, args, context) : { error: `Only ${MAX_CALLS_PER_ROUND} functions run per round; this call was not run.` };
            emit(s.conversationId, { type: 'function_call', name: call.name, arguments: args, result });
            results.push({ call, args, result });
          }
          return { results };
        }),

        save: fromPromise(async ({ input }: { input: { setup: ConversationSetup; turn: Turn } }) => {
          const { setup: s, turn } = input;
          const saved = await pool.transaction(async (tx) => {
            const message = await insertMessage(tx, { conversationId: s.conversationId, role: 'assistant', content: turn.text, functionCalls: turn.calls, turn: { ends: turns.get(s.conversationId)?.owner } });
            await settleReply(tx, turn.userMessageId);
            return message;
          });
          leavingTurn(s.conversationId);
          deliver(s.conversationId, saved.id, { type: 'message', role: 'assistant', content: turn.text, function_calls: turn.calls });
        }),

        refund: fromPromise(async ({ input }: { input: { setup: ConversationSetup; turn: Turn } }) => {
          const { setup: s, turn } = input;
          const owner = leavingTurn(s.conversationId);
          if (owner) await holdTurn(pool, s.conversationId, owner, null);
          if (turn.charged <= 0) return;
          await pool.transaction((tx) => refundMessage(tx, { conversationId: s.conversationId, messageId: turn.userMessageId, userId: s.ownerId, cost: turn.charged }, 'The reply failed'));
        }),
      },
    });
    const actor = createActor(machine, { input: { setup } });
    actor.start();
    return { actor, version, lastUsed: Date.now(), busy: 0 };
  }

  const sweeper = setInterval(() => {
    const now = Date.now();
    for (const [id, entry] of live) {
      if (entry.busy === 0 && now - entry.lastUsed > idleMs && events.listenerCount(id) === 0) {
        entry.actor.send({ type: 'end' });
        live.delete(id);
      }
    }
  }, Math.min(idleMs, 60_000));
  sweeper.unref();

  /**
   * Refunds charged messages still owed a reply after `olderThanSeconds`: a process that stopped
   * mid-turn, or a refund that could not be written, leaves them. Each is refunded once (the
   * refund's reference is the message). @returns how many were refunded.
   */
  async function refundUnanswered(olderThanSeconds = UNANSWERED_AFTER_SECONDS): Promise<number> {
    let refunded = 0;
    for (const message of await unansweredMessages(pool, olderThanSeconds, 500)) {
      const done = await pool.transaction((tx) =>
        refundMessage(tx, { conversationId: message.conversation_id, messageId: message.id, userId: message.user_id, cost: message.cost }, 'No reply was given'),
      );
      if (done) {
        refunded++;
        logger.warn({ conversationId: message.conversation_id, messageId: message.id, userId: message.user_id }, 'message refunded: its reply was never given');
      }
    }
    return refunded;
  }

  const refundSweep = setInterval(() => {
    refundUnanswered().catch((error: unknown) => logger.error({ err: error }, 'unanswered messages could not be refunded'));
  }, 60_000);
  refundSweep.unref();

  /**
   * The conversation's actor, rebuilt when the assistant or its tools changed since it was built
   * (a new prompt, a removed tool and its credentials) once it has nothing queued; a busy one
   * finishes its queue as it was.
   */
  async function actorFor(conversation: ConversationRow, assistant: AssistantWithTools): Promise<Live> {
    const version = versionOf(assistant);
    const existing = live.get(conversation.id);
    if (existing && (existing.version === version || existing.busy > 0)) return existing;
    if (existing) {
      existing.actor.send({ type: 'end' });
      live.delete(conversation.id);
    }
    let pending = starting.get(conversation.id);
    if (!pending) {
      pending = load(conversation, assistant, version).finally(() => starting.delete(conversation.id));
      starting.set(conversation.id, pending);
    }
    const entry = await pending;
    live.set(conversation.id, entry);
    return entry;
  }

  return {
    /**
     * Queues a user message; resolves with the reply once every earlier message is answered.
     * @throws PlatformError `insufficient_balance`; LlmError when the model fails (the charge is refunded).
     */
    async send(conversation: ConversationRow, assistant: AssistantWithTools, text: string): Promise<TurnResult> {
      if (draining) throw shuttingDown();
      busy++;
      try {
        const entry = await actorFor(conversation, assistant);
        entry.busy++;
        entry.lastUsed = Date.now();
        try {
          return await new Promise<TurnResult>((resolve, reject) => entry.actor.send({ type: 'message', job: { text, resolve, reject } }));
        } finally {
          entry.busy--;
          entry.lastUsed = Date.now();
        }
      } finally {
        busy--;
        if (busy === 0) for (const waiter of quietWaiters.splice(0)) waiter();
      }
    },

    /** The first step of a stop: new messages are refused (503); those taken are answered. */
    drain(): void {
      draining = true;
    },

    /** Resolves once no message is queued or being answered here. */
    quiet(): Promise<void> {
      return busy === 0 ? Promise.resolve() : new Promise((resolve) => quietWaiters.push(resolve));
    },

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

    liveCount(): number {
      return live.size;
    },

    refundUnanswered,

    /**
     * Cuts short the turns still running (each refunds its message and its caller gets 503), waits
     * for them to settle, and stops every actor.
     */
    async stop(): Promise<void> {
      draining = true;
      stopped = true;
      stopping.abort();
      // A tool call under way finishes first (it has its own time limit); not waited for past this.
      await within(this.quiet(), STOP_TURNS_MS);
      for (const conversationId of [...turns.keys()]) leavingTurn(conversationId);
      clearInterval(sweeper);
      clearInterval(refundSweep);
      for (const entry of live.values()) entry.actor.stop();
      live.clear();
      await notifications?.close();
    },
  };
}

export type ConversationEngine = ReturnType<typeof createConversationEngine>;

/** The reason a reply failed, as the `Failed to process message: <reason>` error says it. */
export function failureReason(error: unknown): string {
  if (error instanceof LlmError) return error.message;
  if (error instanceof PlatformError) return error.message;
  return 'an unexpected error occurred';
}
