import { Worker } from 'node:worker_threads';
import type { Logger } from '../../logger.js';
import type { SpeechReply, SpeechRequest } from '../../../workers/speechProtocol.js';

/**
 * The offline speech synthesizer of the `dev` voice: espeak-ng in one worker thread
 * (`workers/speech.ts`), so synthesis (about 10 ms of CPU per second of speech) never runs on the
 * event loop that sends the calls' 20 ms frames. The piscina pool is not used: a document
 * extraction there may hold a thread for minutes, and a live call cannot wait behind it.
 *
 * The thread starts on the first request and stays. When it cannot start (the package missing or
 * broken) or dies, `speak` throws `SynthesizerUnavailable` and the dev voice falls back to its
 * tone; a thread that died is started again on a later request, one that could not load is not.
 */

export class SynthesizerUnavailable extends Error {
  override readonly name = 'SynthesizerUnavailable';
}

export interface SpeakOptions {
  /** espeak-ng voice (`en-us`, `de+f3`). */
  readonly voice: string;
  /** Words per minute. */
  readonly rate: number;
  /** 0-99. */
  readonly pitch: number;
  readonly signal: AbortSignal;
}

/** The longest the thread may take to load espeak-ng (its 24 MB of voice data). */
const LOAD_TIMEOUT_MS = 20_000;

interface Pending {
  readonly chunks: Int16Array[];
  done: boolean;
  error: Error | undefined;
  wake: (() => void) | undefined;
}

export class EspeakSynthesizer {
  private worker: Worker | undefined;
  private ready: Promise<void> | undefined;
  /** Set once loading failed: the package cannot run here. */
  private broken: Error | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** The thread's time and the audio it produced, for the benchmark of synthesis cost. */
  synthMs = 0;
  samples = 0;

  constructor(
    private readonly logger: Logger,
    private readonly workerUrl: URL = new URL('../../../workers/speech.mjs', import.meta.url),
  ) {}

  /** Resolves once espeak-ng is loaded; rejects with `SynthesizerUnavailable` when it cannot be. */
  start(): Promise<void> {
    if (this.broken) return Promise.reject(this.broken);
    this.ready ??= this.launch();
    return this.ready;
  }

  /**
   * Streams PCM16 16 kHz audio of `text` as the thread produces it.
   * @throws SynthesizerUnavailable when the thread cannot start or dies before the end.
   */
  async *speak(text: string, options: SpeakOptions): AsyncIterable<Int16Array> {
    await this.start();
    const worker = this.worker!;
    const id = this.nextId++;
    const entry: Pending = { chunks: [], done: false, error: undefined, wake: undefined };
    this.pending.set(id, entry);
    const abort = () => {
      this.post({ type: 'cancel', id });
      entry.done = true;
      entry.wake?.();
    };
    options.signal.addEventListener('abort', abort, { once: true });
    try {
      this.post({ type: 'speak', id, text, voice: options.voice, rate: options.rate, pitch: options.pitch }, worker);
      for (;;) {
        if (entry.chunks.length > 0) {
          yield entry.chunks.shift()!;
          continue;
        }
        if (entry.error) throw entry.error;
        if (entry.done || options.signal.aborted) return;
        await new Promise<void>((resolve) => (entry.wake = resolve));
        entry.wake = undefined;
      }
    } finally {
      options.signal.removeEventListener('abort', abort);
      if (!entry.done) this.post({ type: 'cancel', id });
      this.pending.delete(id);
    }
  }

  async close(): Promise<void> {
    this.broken = new SynthesizerUnavailable('The speech synthesizer was closed');
    const worker = this.worker;
    this.worker = undefined;
    this.failAll(this.broken);
    await worker?.terminate();
  }

  private post(message: SpeechRequest, worker = this.worker): void {
    worker?.postMessage(message);
  }

  private launch(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const worker = new Worker(this.workerUrl);
      this.worker = worker;
      // An idle synthesizer does not keep the process alive; `close` ends it at the platform's stop.
      worker.unref();
      let loaded = false;
      const timer = setTimeout(() => fail(new Error(`espeak-ng did not load within ${LOAD_TIMEOUT_MS} ms`)), LOAD_TIMEOUT_MS);
      timer.unref();
      const fail = (error: Error) => {
        clearTimeout(timer);
        if (worker !== this.worker) return;
        this.worker = undefined;
        void worker.terminate();
        const unavailable = new SynthesizerUnavailable(error.message, { cause: error });
        this.failAll(unavailable);
        if (!loaded) {
          this.broken = unavailable;
          this.logger.error({ err: error }, 'the speech synthesizer could not be loaded; the dev voice hums instead of speaking');
          reject(unavailable);
        } else {
          // Started again on the next request.
          this.ready = undefined;
          this.logger.error({ err: error }, 'the speech synthesizer thread failed; it is started again for the next sentence');
        }
      };
      worker.on('message', (reply: SpeechReply) => {
        if (reply.type === 'ready') {
          loaded = true;
          clearTimeout(timer);
          this.logger.info({ loadMs: Math.round(reply.loadMs) }, 'the speech synthesizer is loaded');
          resolve();
          return;
        }
        const entry = this.pending.get(reply.id);
        if (reply.type === 'audio') entry?.chunks.push(reply.samples);
        else if (reply.type === 'done') {
          this.synthMs += reply.synthMs;
          this.samples += reply.samples;
          if (entry) entry.done = true;
        } else if (entry) entry.error = new SynthesizerUnavailable(reply.message);
        entry?.wake?.();
      });
      worker.on('error', (error) => fail(error));
      worker.on('exit', (code) => fail(new Error(`The speech synthesizer thread exited with code ${code}`)));
    });
  }

  private failAll(error: Error): void {
    for (const entry of this.pending.values()) {
      entry.error ??= error;
      entry.wake?.();
    }
  }
}
