import { randomUUID } from 'node:crypto';
import type { DatabasePool, DatabaseTransactionConnection } from 'slonik';
import { createActor, fromPromise, type ActorRefFrom } from 'xstate';
import type { AssistantRow, AssistantWithTools } from '../assistants/repository.js';
import { within } from '../bounded.js';
import { deadlineSignal, sleep, type Clock } from '../clock.js';
import type { SweepGate } from '../sweeps.js';
import type { CatalogService } from '../catalog/service.js';
import { PlatformError } from '../errors.js';
import type { KnowledgeService } from '../knowledge/service.js';
import { postLedgerEntry, postUnreservedDebit } from '../ledger/service.js';
import type { LlmRegistry } from '../llm/registry.js';
import { LlmError, type ChatMessage, type LlmProvider } from '../llm/types.js';
import type { Logger } from '../logger.js';
import type { OutboundFetch } from '../net/outbound.js';
import { prices } from '../prices.js';
import { listAssistantTools } from '../tools/repository.js';
import { conversationMachine, type TurnHooks, type ActOutput, type ConversationSetup, type Job, type ThinkOutput, type TurnResult, type Turn } from './machine.js';
import { createConversationFanout } from './fanout.js';
import {
  clearMessageCost,
  holdTurn,
  insertMessage,
  listMessages,
  lockConversation,
  lockUnanswered,
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
 * hands what they stream and store to the fanout (`fanout.ts`), which reaches the sockets.
 */

export interface EngineDeps {
  readonly pool: DatabasePool;
  /** The database the pool is of: with it, sockets here hear of messages stored by other processes. */
  readonly databaseUrl?: string;
  readonly catalog: CatalogService;
  readonly llm: LlmRegistry;
  readonly knowledge: KnowledgeService;
  readonly outbound: OutboundFetch;
  readonly logger: Logger;
  /** The clock of the engine's timers: sweeps, turn deadlines, lease renewals and waits for a turn. */
  readonly clock: Clock;
  /** Runs the sweep of unanswered messages once per period across processes; without it, every minute here. */
  readonly sweeps?: SweepGate;
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
export async function refundMessage(tx: DatabaseTransactionConnection, message: { conversationId: string; messageId: number; userId: number; cost: number }, reason: string): Promise<boolean> {
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
  const { pool, logger, clock } = deps;
  const idleMs = deps.idleMs ?? 10 * 60 * 1000;
  const turnMs = deps.turnMs ?? 3 * 60 * 1000;
  const TURN_LEASE_SECONDS = deps.turnLeaseSeconds ?? 60;
  const overdue = () => new LlmError(`the reply was not done within ${turnMs / 1000} s`, false);
  /** A message waits this long at most for another process's turn on its conversation. */
  const waitForTurnMs = turnMs + 2 * TURN_LEASE_SECONDS * 1000;
  /** The turn this process holds per conversation (its actor runs one at a time): owner id and its lease heartbeat's stop. */
  const turns = new Map<string, { owner: string; stopHeartbeat: () => void }>();
  let stopped = false;
  /** A stop has begun: no new message is taken; turns under way go on until `stop` cuts them short. */
  let draining = false;
  /** Aborted by `stop`: turns still running give up (and refund) instead of holding the stop. */
  const stopping = new AbortController();
  const shuttingDown = () => new PlatformError('shutting_down', { headers: { 'Retry-After': '5' } });
  /** Messages queued or being answered, over every actor. */
  let busy = 0;
  /** Rejects each message still queued or being answered: at a stop, past its wait, none is left hanging. */
  const unsettled = new Set<(error: unknown) => void>();
  const quietWaiters: Array<() => void> = [];

  function holdingTurn(conversationId: string, owner: string): void {
    // A turn accepted as the engine stopped is given up at once: nobody here will answer it.
    if (stopped) {
      void holdTurn(pool, conversationId, owner, null).catch((error: unknown) => logger.warn({ err: error, conversationId }, 'could not give the turn up'));
      return;
    }
    const stopHeartbeat = clock.every((TURN_LEASE_SECONDS * 1000) / 3, () =>
      holdTurn(pool, conversationId, owner, TURN_LEASE_SECONDS).catch((error: unknown) => logger.warn({ err: error, conversationId }, 'could not renew the turn')),
    );
    turns.set(conversationId, { owner, stopHeartbeat });
  }

  /** Stops renewing this process's turn; returns its owner id (for the statement that ends it). */
  function leavingTurn(conversationId: string): string | undefined {
    const turn = turns.get(conversationId);
    if (!turn) return undefined;
    turn.stopHeartbeat();
    turns.delete(conversationId);
    return turn.owner;
  }
  interface Live {
    readonly actor: ActorRefFrom<typeof conversationMachine>;
    /** The assistant's settings and tools it was built from (see `versionOf`). */
    readonly version: string;
    lastUsed: number;
    busy: number;
  }
  const live = new Map<string, Live>();
  const starting = new Map<string, Promise<Live>>();

  const fanout = createConversationFanout(pool, deps.databaseUrl, logger);
  const { emit, deliver } = fanout;

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
          let accepted: { messageId: number; aiEnabled: boolean; charged: number } | undefined;
          const owner = randomUUID();
          const waitUntil = clock.now() + waitForTurnMs;
          for (let waitMs = 25; ; waitMs = Math.min(waitMs * 2, 500)) {
            if (stopped) throw shuttingDown();
            accepted = await pool.transaction(async (tx) => {
              const state = await lockConversation(tx, s.conversationId);
              // Another process is answering this conversation: its turn comes first.
              if (state.turn_busy) return undefined;
              // Messages this actor has not seen (written by another process) join its history.
              if (state.message_count !== s.history.length) s.history.splice(0, s.history.length, ...historyOf(await listMessages(tx, s.conversationId)));
              const price = state.ai_enabled || !job.hooks?.chargeOnlyAnswered ? s.price : 0;
              const message = await insertMessage(tx, {
                conversationId: s.conversationId,
                role: 'user',
                content: job.text,
                cost: price,
                replyPending: state.ai_enabled && price > 0,
                turn: state.ai_enabled ? { takes: owner, seconds: TURN_LEASE_SECONDS } : undefined,
              });
              await job.hooks?.accepted?.(tx, message.id);
              // Not out of what the owner's live calls hold: they may be running on other processes.
              if (price > 0) {
                await postUnreservedDebit(tx, { userId: s.ownerId, amount: -price, kind: 'conversation_message', reference: String(message.id), reason: `Message in conversation ${s.conversationId}` });
              }
              return { messageId: message.id, aiEnabled: state.ai_enabled, charged: price };
            });
            if (accepted) break;
            if (clock.now() > waitUntil) throw new LlmError('another reply in this conversation is still being written', true);
            await sleep(clock, waitMs);
          }
          if (accepted.aiEnabled) holdingTurn(s.conversationId, owner);
          deliver(s.conversationId, accepted.messageId, { type: 'message', id: accepted.messageId, role: 'user', content: job.text, function_calls: [] });
          if (accepted.aiEnabled) emit(s.conversationId, { type: 'typing', active: true });
          let systemPrompt = s.systemPrompt;
          if (accepted.aiEnabled && s.promptKnowledgebaseId !== undefined) {
            const passages = await deps.knowledge.search(s.ownerId, s.promptKnowledgebaseId, job.text, 3).catch(() => []);
            if (passages.length > 0) systemPrompt += `\n\n${knowledgeSection(passages)}`;
          }
          return { messageId: accepted.messageId, charged: accepted.charged, aiEnabled: accepted.aiEnabled, systemPrompt, deadline: clock.now() + turnMs };
        }),

        think: fromPromise(async ({ input }: { input: { setup: ConversationSetup; turn: Turn } }): Promise<ThinkOutput> => {
          const { setup: s, turn } = input;
          const overtime = deadlineSignal(clock, turn.deadline, overdue);
          const deadline = AbortSignal.any([overtime.signal, stopping.signal]);
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
          const result = await round
            .catch((error: unknown) => {
              throw stopping.signal.aborted ? shuttingDown() : deadline.aborted ? overdue() : error;
            })
            .finally(overtime.done);
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
            if (clock.now() >= turn.deadline) throw overdue();
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
            await turn.job.hooks?.saved?.(tx, { messageId: message.id, text: turn.text });
            return message;
          });
          leavingTurn(s.conversationId);
          deliver(s.conversationId, saved.id, { type: 'message', id: saved.id, role: 'assistant', content: turn.text, function_calls: turn.calls });
          emit(s.conversationId, { type: 'typing', active: false });
        }),

        refund: fromPromise(async ({ input }: { input: { setup: ConversationSetup; turn: Turn } }) => {
          const { setup: s, turn } = input;
          emit(s.conversationId, { type: 'typing', active: false });
          const owner = leavingTurn(s.conversationId);
          if (owner) await holdTurn(pool, s.conversationId, owner, null);
          if (turn.charged <= 0) return;
          await pool.transaction((tx) => refundMessage(tx, { conversationId: s.conversationId, messageId: turn.userMessageId, userId: s.ownerId, cost: turn.charged }, 'The reply failed'));
        }),
      },
    });
    const actor = createActor(machine, { input: { setup }, clock });
    actor.start();
    return { actor, version, lastUsed: clock.now(), busy: 0 };
  }

  const stopSweeper = clock.every(Math.min(idleMs, 60_000), () => {
    const now = clock.now();
    for (const [id, entry] of live) {
      if (entry.busy === 0 && now - entry.lastUsed > idleMs && !fanout.watched(id)) {
        entry.actor.send({ type: 'end' });
        live.delete(id);
      }
    }
  });

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

  const refundSweep = () =>
    refundUnanswered().catch((error: unknown) => logger.error({ err: error }, 'unanswered messages could not be refunded'));
  const stopRefundSweep = deps.sweeps ? deps.sweeps.every('unanswered-messages', 60_000, refundSweep) : clock.every(60_000, refundSweep);

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
    async send(conversation: ConversationRow, assistant: AssistantWithTools, text: string, hooks?: TurnHooks): Promise<TurnResult> {
      if (draining) throw shuttingDown();
      busy++;
      try {
        const entry = await actorFor(conversation, assistant);
        entry.busy++;
        entry.lastUsed = clock.now();
        try {
          return await new Promise<TurnResult>((resolve, reject) => {
            const abandon = (error: unknown) => {
              unsettled.delete(abandon);
              reject(error);
            };
            unsettled.add(abandon);
            const settled = <T>(settle: (value: T) => void) => (value: T) => {
              unsettled.delete(abandon);
              settle(value);
            };
            entry.actor.send({ type: 'message', job: { text, hooks, resolve: settled(resolve), reject: settled(reject) } });
          });
        } finally {
          entry.busy--;
          entry.lastUsed = clock.now();
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

    subscribe: fanout.subscribe,
    watching: fanout.watching,

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
      // What is still queued or running is cut short: its caller hears so now, and its turn is
      // given up (another process answers the message; its charge is refunded there or by the sweep).
      for (const abandon of [...unsettled]) abandon(shuttingDown());
      await Promise.all(
        [...turns.keys()].map((conversationId) => {
          const owner = leavingTurn(conversationId);
          return owner ? holdTurn(pool, conversationId, owner, null).catch((error: unknown) => logger.warn({ err: error, conversationId }, 'could not give the turn up')) : undefined;
        }),
      );
      stopSweeper();
      stopRefundSweep();
      for (const entry of live.values()) entry.actor.stop();
      live.clear();
      await fanout.close();
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
