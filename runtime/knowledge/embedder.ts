import type { WorkerPool } from '../workers.js';

/**
 * Text to vectors. Vectors are L2-normalised, so a dot product is the cosine; `model` names the
 * vector space, and vectors of different models are never compared.
 */
export interface Embedder {
  readonly model: string;
  /** True when chunks can be embedded inside the worker pool along with chunking. */
  readonly local: boolean;
  embed(texts: readonly string[]): Promise<Float32Array[]>;
}

export class EmbeddingError extends Error {
  override readonly name = 'EmbeddingError';
  constructor(message: string, readonly retryable: boolean, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The built-in embedder: hashed n-gram vectors computed in the worker pool, no network. */
export function createLocalEmbedder(workers: WorkerPool): Embedder {
  return {
    model: 'local-hashed-ngrams-384',
    local: true,
    async embed(texts) {
      const flat = await workers.embedTexts([...texts]);
      const dimensions = texts.length === 0 ? 0 : flat.length / texts.length;
      return texts.map((_, i) => flat.slice(i * dimensions, (i + 1) * dimensions));
    },
  };
}

function normalise(values: number[]): Float32Array {
  const vector = Float32Array.from(values);
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < vector.length; i++) vector[i]! /= norm;
  return vector;
}

export interface OpenAiEmbedderOptions {
  /** e.g. `https://api.openai.com/v1`; `/embeddings` is appended. */
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly model: string;
  /** Texts per request. @defaultValue 64 */
  readonly batchSize?: number;
  /** Per request. @defaultValue 30 000 ms */
  readonly timeoutMs?: number;
}

/** Any OpenAI-compatible `/embeddings` endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp). */
export function createOpenAiEmbedder(options: OpenAiEmbedderOptions): Embedder {
  const batchSize = options.batchSize ?? 64;
  return {
    model: `openai:${options.model}`,
    local: false,
    async embed(texts) {
      const out: Float32Array[] = [];
      for (let start = 0; start < texts.length; start += batchSize) {
        const input = texts.slice(start, start + batchSize);
        let response: Response;
        try {
          response = await fetch(`${options.baseUrl}/embeddings`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) },
            body: JSON.stringify({ model: options.model, input }),
            signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
          });
        } catch (cause) {
          throw new EmbeddingError(`The embeddings service could not be reached: ${(cause as Error).message}`, true, { cause });
        }
        if (!response.ok) {
          const retryable = response.status === 429 || response.status >= 500;
          throw new EmbeddingError(`The embeddings service answered ${response.status}`, retryable);
        }
        const body = (await response.json()) as { data?: Array<{ index: number; embedding: number[] }> };
        const data = [...(body.data ?? [])].sort((a, b) => a.index - b.index);
        if (data.length !== input.length) throw new EmbeddingError('The embeddings service returned the wrong number of vectors', true);
        for (const item of data) out.push(normalise(item.embedding));
      }
      return out;
    },
  };
}
