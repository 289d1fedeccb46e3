import { LlmError, type ChatMessage, type FunctionDefinition, type LlmProvider, type ToolCall } from '../llm/types.js';
import type { Logger } from '../logger.js';
import { stallGuard } from '../net/stall.js';

/**
 * One streamed model round, shared by text conversations, voice calls and post-call evaluation:
 * text deltas as they come, then the functions the model called; the fallback model takes over
 * when the first fails or stalls.
 */

/** Tool rounds per user message (or caller turn) before the model must answer in words. */
export const MAX_TOOL_ROUNDS = 5;

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
