import { pathToFileURL } from 'node:url';
import type { Registry } from 'prom-client';
import { createLogger } from '../runtime/logger.js';
import type { RuntimeOptions, ServerRole } from '../runtime/platform.js';
import { createMachineMetrics, type MetricsMessage } from './machine_metrics.js';
import { configOrExit, serve } from './serve.js';

/**
 * A server process started by the supervisor (api/supervisor.ts) over an IPC channel: the
 * configuration from the environment as any server process reads it, and from the supervisor its
 * role (the database, its index) and the port. It says `ready` once it serves, and stops by
 * itself, hurried, when the channel closes without a stop (the supervisor was killed). Its
 * `GET /metrics` answers the figures of every server process, through the supervisor
 * (api/machine_metrics.ts).
 */

/** The supervisor's one message to a server process, before it starts. */
export interface WorkerStart {
  readonly role: ServerRole;
  readonly port: number;
}

/** What a server process tells its supervisor: it waits for its start (messages sent before it listens could be lost), and it serves. */
export const ASK_START = 'start?';
export const READY = 'ready';

/** A message to the supervisor; none when it is gone (the channel's close stops this process). */
function tell(message: string | MetricsMessage): void {
  process.send?.(message, undefined, undefined, () => undefined);
}

/** Runs this process as a supervisor's server process; `runtime`: what a benchmark replaces (its carrier). */
export function runWorker(runtime?: (start: WorkerStart) => RuntimeOptions): void {
  const config = configOrExit();
  const abandoned = new Promise<void>((resolve) => process.once('disconnect', resolve));
  let started = false;
  let registry: Registry | undefined;
  const metrics = createMachineMetrics(() => registry, tell);
  process.once('message', (start: WorkerStart) => {
    started = true;
    process.on('message', (message) => metrics.handle(message));
    const logger = createLogger(config.logLevel).child({ worker: start.role.index });
    void serve({ ...config, port: start.port }, logger, {
      role: start.role,
      runtime: runtime?.(start),
      abandoned,
      scrapeMetrics: () => metrics.scrape(),
      onListening: (platform) => {
        registry = platform.runtime.metrics.registry;
        tell(READY);
      },
    });
  });
  tell(ASK_START);
  // Gone before it said what to run: nothing was started.
  void abandoned.then(() => started || process.exit(1));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) runWorker();
