import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { INPUT_SAMPLES, type InferMessage, type ResultMessage } from './vadProtocol.js';

/**
 * The Silero VAD worker thread (one per process, see `vadProtocol.ts`): holds the ONNX session and
 * each stream's recurrent state, and answers batches of windows with speech probabilities. A
 * stream met for the first time starts from Silero's initial (zero) state. The entries of one
 * stream in a batch run in their order, one inference per round, each round holding every
 * stream's next entry. Any failure ends the thread (the engine falls back and starts another).
 */

const STATE_SIZE = 128;

const port = parentPort!;
const { modelPath } = workerData as { modelPath: string };
// One thread of inference: the process's other core(s) serve the event loop.
const session = await ort.InferenceSession.create(modelPath, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all' });
const sampleRate = new ort.Tensor('int64', BigInt64Array.of(16_000n), []);
/** Per stream: Silero v5's state, [2][128] of its [2, batch, 128] tensor. */
const states = new Map<number, Float32Array>();

async function infer(message: InferMessage): Promise<ResultMessage> {
  const started = performance.now();
  for (const id of message.released) states.delete(id);
  const { ids, seqs, windows } = message;
  const probabilities = new Float32Array(ids.length);
  // Round r holds each stream's r-th entry of the batch.
  const seen = new Map<number, number>();
  const rounds: number[][] = [];
  for (let i = 0; i < ids.length; i++) {
    const round = seen.get(ids[i]!) ?? 0;
    seen.set(ids[i]!, round + 1);
    (rounds[round] ??= []).push(i);
  }
  for (const rows of rounds) {
    const batch = rows.length;
    const input = new Float32Array(batch * INPUT_SAMPLES);
    const state = new Float32Array(2 * batch * STATE_SIZE);
    rows.forEach((entry, b) => {
      const offset = entry * INPUT_SAMPLES;
      for (let k = 0; k < INPUT_SAMPLES; k++) input[b * INPUT_SAMPLES + k] = windows[offset + k]! / 32_768;
      const own = states.get(ids[entry]!);
      if (!own) return;
      state.set(own.subarray(0, STATE_SIZE), b * STATE_SIZE);
      state.set(own.subarray(STATE_SIZE), (batch + b) * STATE_SIZE);
    });
    const output = await session.run({
      input: new ort.Tensor('float32', input, [batch, INPUT_SAMPLES]),
      state: new ort.Tensor('float32', state, [2, batch, STATE_SIZE]),
      sr: sampleRate,
    });
    const probability = output.output!.data as Float32Array;
    const next = output.stateN!.data as Float32Array;
    rows.forEach((entry, b) => {
      probabilities[entry] = probability[b]!;
      const own = states.get(ids[entry]!) ?? new Float32Array(2 * STATE_SIZE);
      own.set(next.subarray(b * STATE_SIZE, (b + 1) * STATE_SIZE), 0);
      own.set(next.subarray((batch + b) * STATE_SIZE, (batch + b + 1) * STATE_SIZE), STATE_SIZE);
      states.set(ids[entry]!, own);
    });
  }
  return { type: 'result', ids, seqs, probabilities, inferMs: performance.now() - started };
}

// Batches are answered one at a time, in order (the engine sends the next once this one is back).
let chain = Promise.resolve();
port.on('message', (message: InferMessage) => {
  chain = chain.then(async () => {
    const result = await infer(message);
    port.postMessage(result, [result.ids.buffer, result.seqs.buffer, result.probabilities.buffer] as ArrayBuffer[]);
  });
  chain.catch((error: unknown) => {
    // Out of the thread: the engine hears 'error', falls back and starts a new one.
    setImmediate(() => {
      throw error;
    });
  });
});
port.postMessage({ type: 'ready' });
