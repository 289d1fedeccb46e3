import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import type { InspectUploadInput, InspectUploadResult } from '../workers/tasks.js';

/**
 * The CPU worker pool. Callers name the task and give it a time limit; large buffers are
 * transferred to the worker and back.
 */

const ENTRY = fileURLToPath(new URL('../workers/entry.mjs', import.meta.url));

export interface WorkerPool {
  inspectUpload(input: InspectUploadInput, timeoutMs?: number): Promise<InspectUploadResult>;
  close(): Promise<void>;
}

/** A buffer that owns its whole ArrayBuffer can be transferred; a view into a shared one is copied. */
function transferable(bytes: Uint8Array): Uint8Array {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer) return bytes;
  return new Uint8Array(bytes);
}

export function createWorkerPool(size: number): WorkerPool {
  const pool = new Piscina({ filename: ENTRY, maxThreads: size, minThreads: Math.min(1, size), idleTimeout: 60_000 });
  return {
    inspectUpload(input, timeoutMs = 10_000) {
      const bytes = transferable(input.bytes);
      return pool.run({ type: input.type, bytes }, { name: 'inspectUpload', signal: AbortSignal.timeout(timeoutMs), transferList: [bytes.buffer as ArrayBuffer] });
    },
    async close() {
      await pool.destroy();
    },
  };
}
