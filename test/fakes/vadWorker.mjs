// A VAD worker that misbehaves, for the engine's failure tests. It loads no model: `modelPath`
// names what it does once it is asked for a batch — `exit` (the thread ends with code 1), `throw`
// (an uncaught error), `hang` (it never answers) — after saying it is ready.
import { parentPort, workerData } from 'node:worker_threads';

const mode = workerData.modelPath;
parentPort.on('message', () => {
  if (mode === 'exit') process.exit(1);
  if (mode === 'throw') throw new Error('inference failed');
});
parentPort.postMessage({ type: 'ready' });
