import type { Clock } from '../../clock.js';
import { parseArguments, runFunction } from '../../agent/functions.js';
import type { ChatMessage, ToolCall } from '../../llm/types.js';
import type { Logger } from '../../logger.js';
import type { ResponseOutcome, ResponseRequest } from '../machine.js';
import type { CallSpec, Language, SessionHooks, TranscriptEntry } from '../spec.js';
import type { BuiltinEffect } from './builtins.js';
import type { Speaker } from './speaker.js';

/**
 * What the responders (the text model's and the realtime model's) share: the call they answer in,
 * how a response ends, the tools they run, and the instructions for responses the caller did not
 * ask for (a re-engagement, a goodbye).
 */

/** The call as a responder sees it. */
export interface ResponseContext {
  readonly spec: CallSpec;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly hooks: SessionHooks;
  readonly speaker: Speaker;
  /** The text model's history of the call (pipeline mode), as the caller heard it. */
  readonly history: ChatMessage[];
  readonly transcript: readonly TranscriptEntry[];
  /** The language the call is in now (a caller may switch). */
  language(): Language;
}

/** How a response ended: the machine's outcome, or a transfer the session carries out first. */
export type Outcome = ResponseOutcome & { transfer?: string };

export const DEFAULT_REENGAGEMENT = 'The caller has been silent for a while. In one short sentence, check whether they are still there.';
const GOODBYES: Record<Extract<ResponseRequest, { kind: 'goodbye' }>['reason'], string> = {
  max_duration: 'The call has reached its time limit. Say a short, friendly goodbye.',
  balance: 'The call has to end now. Say a short, friendly goodbye.',
  voicemail: 'Say a short goodbye.',
  initial_silence: 'Nobody has answered. Say a short goodbye.',
  shutdown: 'The call has to end now for a short service break. Say a short, friendly goodbye and invite them to call again in a few minutes.',
};

/** The instruction for a response the caller did not ask for, in English, to be said in the call's current language. */
export function instructionFor(context: ResponseContext, request: Extract<ResponseRequest, { kind: 'reengage' | 'goodbye' }>): string {
  const instruction = request.kind === 'reengage' ? context.spec.reengagementPrompt ?? DEFAULT_REENGAGEMENT : GOODBYES[request.reason];
  return `${instruction} Speak ${context.language().name}.`;
}

/** Runs one tool the model called: a built-in (its effect collected in `effects`) or the assistant's function. */
export async function runToolCall(context: ResponseContext, call: ToolCall, effects: BuiltinEffect[], userText: string, started: () => void): Promise<unknown> {
  const began = context.clock.now();
  const report = (error: string | undefined) => context.hooks.toolCall?.({ name: call.name, ms: context.clock.now() - began, error });
  try {
    const result = await runTool(context, call, effects, userText, started);
    report(failureOf(result));
    return result;
  } catch (error) {
    report('The tool failed.');
    throw error;
  }
}

/** The failure a tool's result reports (`{error}`, built-ins' `{ok: false, error}`); undefined when it did its work. */
function failureOf(result: unknown): string | undefined {
  if (result === null || typeof result !== 'object') return undefined;
  const { error, ok } = result as { error?: unknown; ok?: unknown };
  if (typeof error === 'string') return error;
  return ok === false ? 'The tool reported a failure.' : undefined;
}

async function runTool(context: ResponseContext, call: ToolCall, effects: BuiltinEffect[], userText: string, started: () => void): Promise<unknown> {
  const args = parseArguments(call.arguments);
  const builtin = context.spec.builtins.find((b) => b.definition.name === call.name);
  if (builtin) {
    const { result, effect } = await builtin.run(args, { now: context.clock.now() });
    if (effect) {
      if (effect.type === 'dtmf') context.speaker.tones(effect.digits, started);
      effects.push(effect);
    }
    return result;
  }
  return runFunction(call.name, args, { ...context.spec.functionContext, fallbackQuery: userText });
}

/** The outcome the built-ins' effects ask for: a transfer first, then the end of the call. */
export function outcomeOf(effects: readonly BuiltinEffect[]): Outcome {
  const transfer = effects.find((e): e is Extract<BuiltinEffect, { type: 'transfer' }> => e.type === 'transfer');
  if (transfer) return { transfer: transfer.number };
  if (effects.some((e) => e.type === 'end_call')) return { end: 'ended_by_assistant' };
  return {};
}
