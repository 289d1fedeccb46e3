import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { LlmError, type LlmEvent, type LlmProvider, type LlmRequest, type ToolCall } from './types.js';

export interface OpenAiCompatibleOptions {
  readonly name: string;
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  /** Per request, streaming included. @defaultValue 30 000 ms */
  readonly timeoutMs?: number;
}

function toOpenAi(message: LlmRequest['messages'][number]): ChatCompletionMessageParam {
  if (message.role === 'tool') return { role: 'tool', content: message.content ?? '', tool_call_id: message.toolCallId ?? '' };
  if (message.role === 'assistant' && message.toolCalls?.length) {
    return {
      role: 'assistant',
      content: message.content,
      tool_calls: message.toolCalls.map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } })),
    };
  }
  return { role: message.role as 'system' | 'user' | 'assistant', content: message.content ?? '' };
}

/**
 * Chat Completions through the official `openai` package, for any compatible server (OpenAI,
 * Azure OpenAI, Groq, vLLM, Ollama, llama.cpp). One retry on 429 and 5xx (the SDK's backoff).
 */
export function createOpenAiCompatibleProvider(options: OpenAiCompatibleOptions): LlmProvider {
  const client = new OpenAI({ apiKey: options.apiKey ?? 'not-needed', baseURL: options.baseUrl, maxRetries: 1, timeout: options.timeoutMs ?? 30_000 });
  return {
    name: options.name,
    async *stream(request): AsyncIterable<LlmEvent> {
      const tools: ChatCompletionTool[] = request.functions.map((fn) => ({ type: 'function', function: { name: fn.name, description: fn.description, parameters: fn.parameters } }));
      let stream;
      try {
        stream = await client.chat.completions.create(
          { model: request.model, messages: request.messages.map(toOpenAi), temperature: request.temperature, stream: true, ...(tools.length ? { tools } : {}), ...(request.json ? { response_format: { type: 'json_object' as const } } : {}) },
          { signal: request.signal },
        );
      } catch (error) {
        throw asLlmError(error);
      }
      const calls = new Map<number, { id: string; name: string; arguments: string }>();
      try {
        for await (const chunk of stream) {
          const delta = chunk.choices[0]?.delta;
          if (!delta) continue;
          if (delta.content) yield { type: 'text', delta: delta.content };
          for (const call of delta.tool_calls ?? []) {
            const entry = calls.get(call.index) ?? { id: '', name: '', arguments: '' };
            if (call.id) entry.id = call.id;
            if (call.function?.name) entry.name += call.function.name;
            if (call.function?.arguments) entry.arguments += call.function.arguments;
            calls.set(call.index, entry);
          }
        }
      } catch (error) {
        throw asLlmError(error);
      }
      if (calls.size > 0) {
        const list: ToolCall[] = [...calls.entries()].sort(([a], [b]) => a - b).map(([index, call]) => ({ id: call.id || `call_${index}`, name: call.name, arguments: call.arguments || '{}' }));
        yield { type: 'tool_calls', calls: list };
      }
    },
  };
}

function asLlmError(error: unknown): LlmError {
  if (error instanceof LlmError) return error;
  if (error instanceof OpenAI.APIError) {
    const status = error.status ?? 0;
    return new LlmError(status ? `the model provider answered ${status}` : `the model provider could not be reached`, status === 0 || status === 429 || status >= 500, { cause: error });
  }
  return new LlmError(`the model provider failed: ${(error as Error).message}`, true, { cause: error });
}
