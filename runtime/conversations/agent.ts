import type { KnowledgeService } from '../knowledge/service.js';
import { KNOWLEDGE_MARKER } from '../llm/dev.js';
import { LlmError, type ChatMessage, type FunctionDefinition, type LlmProvider, type ToolCall } from '../llm/types.js';
import type { Logger } from '../logger.js';
import type { OutboundFetch } from '../net/outbound.js';
import { stallGuard } from '../net/stall.js';
import type { ToolRow } from '../tools/repository.js';
import { SEARCH_FUNCTION, callTool } from './tools.js';

/**
 * The model round and function execution shared by text conversations and voice calls: one
 * streamed model round with the fallback model taking over when the first fails, and running a
 * function the model called (knowledge search or a mid-call tool).
 */

export interface ModelChoice {
  readonly provider: LlmProvider;
  readonly model: string;
}

export interface RoundRequest {
  readonly llm: ModelChoice;
  readonly fallback: ModelChoice | undefined;
  readonly messages: readonly ChatMessage[];
  readonly functions: readonly FunctionDefinition[];
  readonly temperature: number;
  readonly signal?: AbortSignal;
  /** JSON mode. */
  readonly json?: boolean;
  /** Longest wait for the model's next event, its first included. @defaultValue 20 s */
  readonly stallMs?: number;
  onDelta(delta: string): void;
}

/**
 * A model that stops sending mid-answer is given up after this (the SDK's own timeout ends once
 * the headers arrive): its fallback answers instead, or the turn fails, rather than a caller
 * waiting in silence until the call's maximum duration.
 */
export const MODEL_STALL_MS = 20_000;

export interface RoundResult {
  readonly text: string;
  readonly calls: readonly ToolCall[];
}

/** @throws LlmError when the model (and the fallback, if any) fails. */
export async function streamRound(request: RoundRequest, logger: Logger, context: Record<string, unknown>): Promise<RoundResult> {
  const attempt = async (llm: ModelChoice): Promise<RoundResult> => {
    let text = '';
    let calls: ToolCall[] = [];
    const stallMs = request.stallMs ?? MODEL_STALL_MS;
    const guard = stallGuard(request.signal, stallMs);
    try {
      for await (const event of llm.provider.stream({ model: llm.model, messages: request.messages, functions: request.functions, temperature: request.temperature, signal: guard.signal, json: request.json })) {
        if (guard.signal.aborted) break;
        guard.touch();
        if (event.type === 'text') {
          text += event.delta;
          request.onDelta(event.delta);
        } else calls = event.calls;
      }
    } catch (error) {
      if (!guard.stalled) throw error;
    } finally {
      guard.dispose();
    }
    if (guard.stalled) throw new LlmError(`The model sent nothing for ${Math.round(stallMs / 1000)} s`, true);
    return { text, calls };
  };
  try {
    return await attempt(request.llm);
  } catch (error) {
    if (!request.fallback || request.signal?.aborted) throw error;
    logger.warn({ err: error, ...context, provider: request.llm.provider.name }, 'model failed; using the fallback model');
    return attempt(request.fallback);
  }
}

/** Passages of a knowledgebase as a system prompt carries them (`knowledgebase_mode: prompt`); '' for none. */
export function knowledgeSection(passages: ReadonlyArray<{ readonly content: string }>): string {
  return passages.length === 0 ? '' : `${KNOWLEDGE_MARKER}\n${passages.map((p, i) => `[${i + 1}] ${p.content}`).join('\n')}`;
}

/** The arguments a model wrote, as an object; anything that is not a JSON object becomes none. */
export function parseArguments(json: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(json || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // Arguments the model could not write as JSON reach the tool as none.
  }
  return {};
}

export interface FunctionContext {
  readonly ownerId: number;
  readonly tools: ReadonlyMap<string, ToolRow>;
  readonly knowledgebaseId: number | undefined;
  readonly knowledge: KnowledgeService;
  readonly outbound: OutboundFetch;
  /** What to search for when the model gave no query. */
  readonly fallbackQuery: string;
}

/** Runs a knowledge search or a mid-call tool; the model always gets a result, never an exception. */
export async function runFunction(name: string, args: Record<string, unknown>, context: FunctionContext): Promise<unknown> {
  if (name === SEARCH_FUNCTION.name && context.knowledgebaseId !== undefined) {
    const passages = await context.knowledge.search(context.ownerId, context.knowledgebaseId, String(args.query ?? context.fallbackQuery), 3).catch(() => []);
    return { passages: passages.map((p) => ({ content: p.content, source: p.source, document: p.document_name })) };
  }
  const tool = context.tools.get(name);
  return tool ? callTool(tool, args, context.outbound, context.ownerId) : { error: `There is no function named ${name}` };
}
