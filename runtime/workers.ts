import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import type {
  ChunkInput,
  ChunkOutput,
  ExtractFileInput,
  ExtractHtmlInput,
  ExtractResult,
  InspectUploadInput,
  InspectUploadResult,
} from '../workers/tasks.js';
import type { HtmlResult } from '../workers/extract.js';

/**
 * The CPU worker pool. Callers name the task and give it a time limit; large buffers are
 * transferred to the worker and back. Each worker's heap is capped, so a hostile file that
 * would exhaust memory kills one worker (the task fails, piscina replaces the thread), never the
 * server.
 */

const ENTRY = fileURLToPath(new URL('../workers/entry.mjs', import.meta.url));

export interface WorkerPool {
  inspectUpload(input: InspectUploadInput, timeoutMs?: number): Promise<InspectUploadResult>;
  extractFile(input: ExtractFileInput, timeoutMs?: number): Promise<ExtractResult>;
  extractHtml(input: ExtractHtmlInput, timeoutMs?: number): Promise<HtmlResult>;
  chunkAndEmbed(input: ChunkInput, timeoutMs?: number): Promise<ChunkOutput>;
  /** Vectors of the built-in local embedder, flat. */
  embedTexts(texts: string[], timeoutMs?: number): Promise<Float32Array>;
  /** PostgreSQL array literals of vectors, formatted off the event loop. */
  formatVectors(vectors: readonly Float32Array[], timeoutMs?: number): Promise<string[]>;
  close(): Promise<void>;
}

/** A buffer that owns its whole ArrayBuffer can be transferred; a view into a shared one is copied. */
function transferable(bytes: Uint8Array): Uint8Array {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer) return bytes;
  return new Uint8Array(bytes);
}

export function createWorkerPool(size: number, options: { maxHeapMb?: number; onError?: (error: unknown) => void } = {}): WorkerPool {
  const pool = new Piscina({
    filename: ENTRY,
    maxThreads: size,
    // Every thread starts with the pool and loads the task modules (pdf.js, mammoth, cheerio)
    // then, in the background, rather than during the first upload.
    minThreads: size,
    idleTimeout: 60_000,
    resourceLimits: { maxOldGenerationSizeMb: options.maxHeapMb ?? 768 },
  });
  // A thread that fails between tasks is replaced by the pool; unheard, its 'error' event would end the process.
  pool.on('error', (error: unknown) => (options.onError ?? console.error)(error));
  const run = <T>(name: string, input: unknown, timeoutMs: number, transferList?: ArrayBuffer[]): Promise<T> =>
    pool.run(input, { name, signal: AbortSignal.timeout(timeoutMs), transferList });
  return {
    inspectUpload(input, timeoutMs = 30_000) {
      const bytes = transferable(input.bytes);
      return run('inspectUpload', { type: input.type, bytes }, timeoutMs, [bytes.buffer as ArrayBuffer]);
    },
    extractFile(input, timeoutMs = 120_000) {
      const bytes = transferable(input.bytes);
      return run('extractFile', { type: input.type, bytes }, timeoutMs, [bytes.buffer as ArrayBuffer]);
    },
    extractHtml(input, timeoutMs = 30_000) {
      return run('extractHtml', input, timeoutMs);
    },
    chunkAndEmbed(input, timeoutMs = 60_000) {
      return run('chunkAndEmbed', input, timeoutMs);
    },
    embedTexts(texts, timeoutMs = 10_000) {
      return run('embedTexts', { texts }, timeoutMs);
    },
    formatVectors(vectors, timeoutMs = 30_000) {
      const dimensions = vectors[0]?.length ?? 0;
      const flat = new Float32Array(vectors.length * dimensions);
      vectors.forEach((vector, i) => flat.set(vector, i * dimensions));
      return run('formatVectors', { vectors: flat, dimensions }, timeoutMs, [flat.buffer as ArrayBuffer]);
    },
    async close() {
      await pool.destroy();
    },
  };
}
