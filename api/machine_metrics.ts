import type { ChildProcess } from 'node:child_process';
import { AggregatorRegistry, Gauge, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Logger } from '../runtime/logger.js';

/**
 * `GET /metrics` of a machine running WORKERS server processes: the process that takes the scrape
 * asks its supervisor, which asks every serving process for its registry (as JSON), waits at most
 * ANSWER_MS, and returns one exposition of all of them. Every series carries its process's
 * `worker` label, so no two processes' series meet: the figures stay per process, and the
 * combining only makes one metric family of each name. A process that did not answer in time (or
 * is starting again) is left out and counted in `metrics_processes_missing`.
 *
 * The messages, on the supervisor's channel (api/worker.ts has the start handshake):
 *   server process -> supervisor  `machine-metrics?` {id}        a scrape to answer
 *   supervisor -> server process  `own-metrics?` {id}            this process's registry, please
 *   server process -> supervisor  `own-metrics` {id, metrics}    its registry as JSON
 *   supervisor -> server process  `machine-metrics` {id, text}   the machine's exposition
 */

type Metrics = MetricObjectWithValues<MetricValue<string>>[];

export type MetricsMessage =
  | { readonly kind: 'machine-metrics?'; readonly id: number }
  | { readonly kind: 'machine-metrics'; readonly id: number; readonly text: string }
  | { readonly kind: 'own-metrics?'; readonly id: number }
  | { readonly kind: 'own-metrics'; readonly id: number; readonly metrics: Metrics };

/** How long the supervisor waits for the processes' registries. */
const ANSWER_MS = 2_000;
/** How long a server process waits for the supervisor's answer before it serves its own figures. */
const ASK_MS = 5_000;

const KINDS: ReadonlySet<unknown> = new Set(['machine-metrics?', 'machine-metrics', 'own-metrics?', 'own-metrics']);

function isMetricsMessage(message: unknown): message is MetricsMessage {
  return KINDS.has((message as { kind?: unknown } | null)?.kind);
}

/** One exposition of several processes' registries; `missing`: how many processes are not in it. */
export async function combineMetrics(perProcess: readonly Metrics[], missing: number): Promise<string> {
  // A process's start time is 'omit' for prom-client's aggregation (it cannot be summed); labelled per process it is kept.
  const kept = perProcess.map((metrics) => metrics.map((metric) => (metric.aggregator === 'omit' ? { ...metric, aggregator: 'first' as const } : metric)));
  const registry = AggregatorRegistry.aggregate(kept) as Registry;
  new Gauge({ name: 'metrics_processes_missing', help: 'Server processes of this machine whose figures this scrape lacks (not answering within 2 s, or starting again)', registers: [registry] }).set(missing);
  return registry.metrics();
}

export interface MetricsGatherer {
  /** Handles a server process's message if it is of this protocol; false otherwise. */
  handle(child: ChildProcess, message: unknown): boolean;
}

/** The supervisor's side; `serving()`: the server processes that serve now, `total`: how many there should be. */
export function createMetricsGatherer(serving: () => ChildProcess[], total: number, logger: Logger): MetricsGatherer {
  let nextId = 0;
  const waiting = new Map<number, (metrics: Metrics) => void>();

  async function gather(): Promise<string> {
    const children = serving();
    const answers: Metrics[] = [];
    const ids: number[] = [];
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ANSWER_MS);
      const done = (): void => {
        if (answers.length < children.length) return;
        clearTimeout(timer);
        resolve();
      };
      for (const child of children) {
        const id = nextId++;
        ids.push(id);
        waiting.set(id, (metrics) => {
          answers.push(metrics);
          done();
        });
        child.send({ kind: 'own-metrics?', id } satisfies MetricsMessage, undefined, undefined, () => undefined);
      }
      done();
    });
    for (const id of ids) waiting.delete(id);
    const missing = total - answers.length;
    if (missing > 0) logger.warn({ missing, answered: answers.length }, 'metrics scraped without some server processes');
    return combineMetrics(answers, missing);
  }

  return {
    handle(child, message) {
      if (!isMetricsMessage(message)) return false;
      if (message.kind === 'own-metrics') waiting.get(message.id)?.(message.metrics);
      else if (message.kind === 'machine-metrics?') {
        gather().then(
          (text) => child.send({ kind: 'machine-metrics', id: message.id, text } satisfies MetricsMessage, undefined, undefined, () => undefined),
          (error: unknown) => logger.error({ err: error }, 'combining the metrics failed'),
        );
      }
      return true;
    },
  };
}

export interface MachineMetrics {
  /** The machine's exposition (this process's own if the supervisor does not answer in time). */
  scrape(): Promise<string>;
  /** Handles the supervisor's message if it is of this protocol; false otherwise. */
  handle(message: unknown): boolean;
}

/** A server process's side; `own()`: its registry once it serves (undefined before). */
export function createMachineMetrics(own: () => Registry | undefined, send: (message: MetricsMessage) => void): MachineMetrics {
  let nextId = 0;
  const waiting = new Map<number, (text: string) => void>();
  return {
    async scrape() {
      const id = nextId++;
      const text = await new Promise<string | undefined>((resolve) => {
        const timer = setTimeout(() => resolve(undefined), ASK_MS);
        waiting.set(id, (answer) => {
          clearTimeout(timer);
          resolve(answer);
        });
        send({ kind: 'machine-metrics?', id });
      });
      waiting.delete(id);
      return text ?? (await own()?.metrics()) ?? '';
    },
    handle(message) {
      if (!isMetricsMessage(message)) return false;
      if (message.kind === 'machine-metrics') waiting.get(message.id)?.(message.text);
      else if (message.kind === 'own-metrics?') {
        const registry = own();
        if (registry) void registry.getMetricsAsJSON().then((metrics) => send({ kind: 'own-metrics', id: message.id, metrics }));
      }
      return true;
    },
  };
}
