import { runWorker } from '../api/worker.js';
import { createLoopbackCarrier, type LoopbackDial } from '../runtime/calls/carriers/loopback.js';

/**
 * A server process of the calls benchmark: the server process the supervisor runs (api/worker.ts),
 * whose loopback carrier hands each call it places to the benchmark (over the supervisor's channel)
 * for the phones' process to answer.
 */
runWorker(() => ({ carrier: createLoopbackCarrier((call: LoopbackDial) => process.send?.({ dial: call })) }));
