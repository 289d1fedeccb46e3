import type { DatabaseTransactionConnection } from 'slonik';
import { assign, fromPromise, setup } from 'xstate';
import type { ChatMessage, FunctionDefinition, LlmProvider, ToolCall } from '../llm/types.js';
import type { FunctionCallRecord } from './repository.js';

/**
 * One conversation as an actor. Messages queue up and are handled strictly one at a time:
 *
 *   idle -> accepting (store the user message and charge for it, in one transaction)
 *        -> generating (one model round, streamed) -> running_tools -> generating ... (at most MAX_TOOL_ROUNDS, agent/round.ts)
 *        -> saving (store the reply) -> idle
 *   any failure after the charge -> refunding -> idle (the message is kept, the charge is taken back)
 *
 * I/O runs in invoked promise actors, supplied by `provide()` (see engine.ts), so tests can swap them.
 */

export interface TurnResult {
  /** The assistant's reply; null when AI is off for the conversation. */
  readonly message: string | null;
  readonly function_calls: FunctionCallRecord[];
}

/** What a caller does in the turn's own transactions (a channel records its message and queues the reply's delivery). */
export interface TurnHooks {
  /** Charge the message only when the assistant is to answer it (AI on when it is accepted): a channel's rule; the widget charges every message. */
  readonly chargeOnlyAnswered?: boolean;
  /** In the transaction that stores the user message and its charge. */
  readonly accepted?: (tx: DatabaseTransactionConnection, messageId: number) => Promise<void>;
  /** In the transaction that stores the reply; a throw leaves the reply unsaved and the turn refunded. */
  readonly saved?: (tx: DatabaseTransactionConnection, reply: { readonly messageId: number; readonly text: string }) => Promise<void>;
}

export interface Job {
  readonly text: string;
  readonly hooks?: TurnHooks;
  resolve(result: TurnResult): void;
  reject(error: unknown): void;
}

/** What a conversation needs to answer; loaded once when the actor starts. */
export interface ConversationSetup {
  readonly conversationId: string;
  readonly ownerId: number;
  readonly price: number;
  readonly llm: { readonly provider: LlmProvider; readonly model: string };
  readonly fallback: { readonly provider: LlmProvider; readonly model: string } | undefined;
  readonly temperature: number;
  readonly systemPrompt: string;
  readonly functions: readonly FunctionDefinition[];
  /** Knowledge injected into the prompt (`prompt` mode) for this knowledgebase. */
  readonly promptKnowledgebaseId: number | undefined;
  /** Prior messages, oldest first. */
  readonly history: ChatMessage[];
}

export interface Turn {
  readonly job: Job;
  readonly userMessageId: number;
  readonly charged: number;
  /** The model's conversation for this turn: system, history, user, then tool exchanges. */
  readonly messages: ChatMessage[];
  readonly calls: FunctionCallRecord[];
  readonly pending: readonly ToolCall[];
  readonly text: string;
  readonly rounds: number;
  /** When the reply must be done by (epoch ms); set once the message is accepted. */
  readonly deadline: number;
}

export interface AcceptOutput {
  readonly messageId: number;
  readonly charged: number;
  readonly aiEnabled: boolean;
  /** System prompt for this turn (with knowledge for `prompt` mode). */
  readonly systemPrompt: string;
  readonly deadline: number;
}

export interface ThinkOutput {
  readonly text: string;
  readonly calls: readonly ToolCall[];
}

export interface ActOutput {
  readonly results: ReadonlyArray<{ readonly call: ToolCall; readonly args: Record<string, unknown>; readonly result: unknown }>;
}

interface Context {
  readonly setup: ConversationSetup;
  readonly queue: readonly Job[];
  readonly turn: Turn | undefined;
  readonly failure: unknown;
}

type Events = { type: 'message'; job: Job } | { type: 'end' };

export const conversationMachine = setup({
  types: {
    context: {} as Context,
    events: {} as Events,
    input: {} as { setup: ConversationSetup },
  },
  actors: {
    accept: fromPromise<AcceptOutput, { setup: ConversationSetup; job: Job }>(async () => {
      throw new Error('accept is provided by the engine');
    }),
    think: fromPromise<ThinkOutput, { setup: ConversationSetup; turn: Turn }>(async () => {
      throw new Error('think is provided by the engine');
    }),
    act: fromPromise<ActOutput, { setup: ConversationSetup; turn: Turn }>(async () => {
      throw new Error('act is provided by the engine');
    }),
    save: fromPromise<void, { setup: ConversationSetup; turn: Turn }>(async () => {
      throw new Error('save is provided by the engine');
    }),
    refund: fromPromise<void, { setup: ConversationSetup; turn: Turn }>(async () => {
      throw new Error('refund is provided by the engine');
    }),
  },
  guards: {
    hasQueued: ({ context }) => context.queue.length > 0,
    aiDisabled: (_, output: AcceptOutput) => !output.aiEnabled,
    calledTools: (_, output: ThinkOutput) => output.calls.length > 0,
  },
  actions: {
    enqueue: assign({ queue: ({ context, event }) => (event.type === 'message' ? [...context.queue, event.job] : context.queue) }),
    takeNext: assign({
      queue: ({ context }) => context.queue.slice(1),
      turn: ({ context }) => ({ job: context.queue[0]!, userMessageId: 0, charged: 0, messages: [], calls: [], pending: [], text: '', rounds: 0, deadline: 0 }),
    }),
  },
}).createMachine({
  id: 'conversation',
  context: ({ input }) => ({ setup: input.setup, queue: [], turn: undefined, failure: undefined }),
  on: { message: { actions: 'enqueue' } },
  initial: 'idle',
  states: {
    idle: {
      always: { guard: 'hasQueued', target: 'accepting', actions: 'takeNext' },
      on: { end: 'ended' },
    },
    accepting: {
      invoke: {
        src: 'accept',
        input: ({ context }) => ({ setup: context.setup, job: context.turn!.job }),
        onDone: [
          {
            guard: { type: 'aiDisabled', params: ({ event }) => event.output },
            target: 'idle',
            actions: [({ context, event }) => context.setup.history.push({ role: 'user', content: context.turn!.job.text }), ({ context }) => context.turn!.job.resolve({ message: null, function_calls: [] }), assign({ turn: undefined })],
          },
          {
            target: 'generating',
            actions: assign({
              turn: ({ context, event }) => ({
                ...context.turn!,
                userMessageId: event.output.messageId,
                charged: event.output.charged,
                deadline: event.output.deadline,
                messages: [{ role: 'system', content: event.output.systemPrompt }, ...context.setup.history, { role: 'user', content: context.turn!.job.text }],
              }),
            }),
          },
        ],
        onError: { target: 'idle', actions: [({ context, event }) => context.turn!.job.reject(event.error), assign({ turn: undefined })] },
      },
    },
    generating: {
      invoke: {
        src: 'think',
        input: ({ context }) => ({ setup: context.setup, turn: context.turn! }),
        onDone: [
          {
            guard: { type: 'calledTools', params: ({ event }) => event.output },
            target: 'running_tools',
            actions: assign({
              turn: ({ context, event }) => ({
                ...context.turn!,
                rounds: context.turn!.rounds + 1,
                pending: event.output.calls,
                messages: [...context.turn!.messages, { role: 'assistant', content: event.output.text || null, toolCalls: event.output.calls }],
              }),
            }),
          },
          { target: 'saving', actions: assign({ turn: ({ context, event }) => ({ ...context.turn!, text: event.output.text }) }) },
        ],
        onError: { target: 'refunding', actions: assign({ failure: ({ event }) => event.error }) },
      },
    },
    running_tools: {
      invoke: {
        src: 'act',
        input: ({ context }) => ({ setup: context.setup, turn: context.turn! }),
        onDone: {
          target: 'generating',
          actions: assign({
            turn: ({ context, event }) => ({
              ...context.turn!,
              pending: [],
              calls: [...context.turn!.calls, ...event.output.results.map((r) => ({ name: r.call.name, arguments: r.args, result: r.result }))],
              messages: [...context.turn!.messages, ...event.output.results.map((r): ChatMessage => ({ role: 'tool', content: JSON.stringify(r.result), toolCallId: r.call.id }))],
            }),
          }),
        },
        onError: { target: 'refunding', actions: assign({ failure: ({ event }) => event.error }) },
      },
    },
    saving: {
      invoke: {
        src: 'save',
        input: ({ context }) => ({ setup: context.setup, turn: context.turn! }),
        onDone: {
          target: 'idle',
          actions: [
            ({ context }) => {
              const turn = context.turn!;
              context.setup.history.push({ role: 'user', content: turn.job.text }, { role: 'assistant', content: turn.text });
              turn.job.resolve({ message: turn.text, function_calls: turn.calls });
            },
            assign({ turn: undefined }),
          ],
        },
        onError: { target: 'refunding', actions: assign({ failure: ({ event }) => event.error }) },
      },
    },
    refunding: {
      invoke: {
        src: 'refund',
        input: ({ context }) => ({ setup: context.setup, turn: context.turn! }),
        onDone: {
          target: 'idle',
          actions: [
            ({ context }) => context.setup.history.push({ role: 'user', content: context.turn!.job.text }),
            ({ context }) => context.turn!.job.reject(context.failure),
            assign({ turn: undefined, failure: undefined }),
          ],
        },
        onError: { target: 'idle', actions: [({ context }) => context.turn!.job.reject(context.failure), assign({ turn: undefined, failure: undefined })] },
      },
    },
    ended: { type: 'final' },
  },
});

export type ConversationMachine = typeof conversationMachine;
