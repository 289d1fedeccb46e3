/**
 * Language models behind one streaming interface with function calling. Implementations: any
 * OpenAI-compatible Chat Completions API, and `dev`, which needs no network.
 */

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant' | 'tool';
  readonly content: string | null;
  /** Assistant messages that called functions. */
  readonly toolCalls?: readonly ToolCall[];
  /** Tool messages: the call answered. */
  readonly toolCallId?: string;
}

export interface ToolCall {
  readonly id: string;
  readonly name: string;
  /** JSON text as the model produced it. */
  readonly arguments: string;
}

export interface FunctionDefinition {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object. */
  readonly parameters: Record<string, unknown>;
}

export type LlmEvent = { readonly type: 'text'; readonly delta: string } | { readonly type: 'tool_calls'; readonly calls: ToolCall[] };

export interface LlmRequest {
  readonly model: string;
  readonly messages: readonly ChatMessage[];
  readonly functions: readonly FunctionDefinition[];
  readonly temperature: number;
  readonly signal?: AbortSignal;
  /** Ask for one JSON object as the reply (JSON mode). */
  readonly json?: boolean;
}

export class LlmError extends Error {
  override readonly name = 'LlmError';
  constructor(message: string, readonly retryable: boolean, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export interface LlmProvider {
  /** `openai`, `groq`, `dev`... as named in the model catalog. */
  readonly name: string;
  /**
   * Streams the reply: text deltas as they come, then at most one `tool_calls` event.
   * @throws LlmError
   */
  stream(request: LlmRequest): AsyncIterable<LlmEvent>;
}
