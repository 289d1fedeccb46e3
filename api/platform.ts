import type { Config } from '../runtime/config.js';
import type { Logger } from '../runtime/logger.js';
import { within } from '../runtime/bounded.js';
import { startRuntime, type Runtime, type RuntimeOptions, type ServerRole } from '../runtime/platform.js';
import { startupFacts } from '../runtime/startup.js';
import { buildApp } from './app.js';
import { createHttpServer } from './http/server.js';

export interface RunningPlatform {
  /** The storage and services underneath, for the composition root and white-box tests. */
  readonly runtime: Runtime;
  readonly port: number;
  /** `http://HOST:PORT` as bound (the port resolved when 0 was asked for). */
  readonly origin: string;
  /** Stops in order (see `stop` below); resolves once the embedded database, last, has stopped. */
  close(options?: StopOptions): Promise<void>;
}

export interface StopOptions {
  /** How long live calls and replies may go on by themselves. @defaultValue `config.shutdownGraceMs` */
  readonly graceMs?: number;
  /** Settles when the stop must not wait any more (a second signal): the grace and the goodbyes are cut short. */
  readonly hurry?: Promise<void>;
}

/** Goodbyes of the calls still live once the grace is over. */
const GOODBYE_MS = 10_000;
/** At most this long for the ends of the calls to be saved, for requests in flight, and for background work. */
const SAVE_MS = 30_000;
const REQUESTS_MS = 10_000;
const BACKGROUND_MS = 10_000;

/**
 * Starts the server and the runtime under it: the port is bound first (exclusively), so a port in
 * use is refused before any database is touched; until the runtime is up every request is 503.
 * What `npm start` runs and what tests start. With a `role`, one of several server processes of a
 * supervisor (api/supervisor.ts): the port is shared with the siblings and the database is theirs,
 * and `scrapeMetrics` gives `GET /metrics` the figures of them all.
 */
export async function startPlatform(config: Config, logger: Logger, options: RuntimeOptions = {}, role?: ServerRole, scrapeMetrics?: () => Promise<string>): Promise<RunningPlatform> {
  const server = createHttpServer({ logger, jsonBodyLimit: config.jsonBodyLimit, multipartBodyLimit: config.multipartBodyLimit, trustProxy: config.trustProxy });
  const port = await server.listen(config.host, config.port, { shared: role !== undefined });
  let runtime: Runtime;
  try {
    runtime = await startRuntime(config, logger, options, role);
  } catch (error) {
    await server.close(0);
    throw error;
  }
  const origin = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  runtime.setListeningOrigin(origin);
  server.serve(buildApp({ config, logger, runtime, scrapeMetrics }).routing);
  logger.info({ pid: process.pid, host: config.host, port, ...startupFacts(config, runtime.publicUrl(), runtime.embeddedDirectory) }, 'platform listening');

  /**
   * The stop, in order; every wait is bounded, so a stop always ends:
   * 1. Refuse new work: requests are 503 with Retry-After (health says `stopping`), an inbound call
   *    hears a polite refusal, new calls and messages are refused; carrier callbacks and the media
   *    of live calls go on.
   * 2. Grace: live calls and replies finish by themselves, up to `graceMs` (a second signal ends it).
   * 3. End the rest: each call still live says goodbye (up to 10 s), then every call's end is saved
   *    with its charge and its webhook in the outbox; replies still being written are cut short and
   *    refunded.
   * 4. Close the HTTP server: the requests in flight finish (up to 10 s), then every connection closes.
   * 5. Background work: webhook attempts in flight finish, evaluations get 10 s, document jobs
   *    (none claimed since step 1) still running are given back for the next start; then the
   *    worker threads and the database pool close and, last, the embedded PostgreSQL stops.
   */
  async function stop(options: StopOptions = {}): Promise<void> {
    const graceMs = options.graceMs ?? config.shutdownGraceMs;
    let hurried = false;
    void options.hurry?.then(() => (hurried = true));
    const cutShort = options.hurry ?? new Promise<void>(() => {});
    logger.info({ graceMs }, 'stopping: new calls, messages and requests are refused');
    server.drain();
    runtime.drain();
    await within(Promise.race([runtime.quiet(), cutShort]), graceMs);
    await within(runtime.endLive(hurried ? 0 : GOODBYE_MS, options.hurry), SAVE_MS);
    await server.close(REQUESTS_MS);
    await runtime.stop(hurried ? 0 : BACKGROUND_MS);
    logger.info('platform stopped');
  }

  let closing: Promise<void> | undefined;
  return {
    runtime,
    port,
    origin,
    close(options) {
      closing ??= stop(options);
      return closing;
    },
  };
}
