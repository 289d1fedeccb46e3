import type { Config } from '../runtime/config.js';
import type { Logger } from '../runtime/logger.js';
import { startRuntime, type Runtime, type RuntimeOptions } from '../runtime/platform.js';
import { buildApp } from './app.js';

export interface RunningPlatform {
  /** The storage and services underneath, for the composition root and white-box tests. */
  readonly runtime: Runtime;
  readonly port: number;
  /** `http://HOST:PORT` as bound (the port resolved when 0 was asked for). */
  readonly origin: string;
  /** Stops accepting, finishes in-flight requests, closes the pool, stops the embedded database. */
  close(): Promise<void>;
}

/** Starts storage, services and the server: what `npm start` runs and what tests start. */
export async function startPlatform(config: Config, logger: Logger, options: RuntimeOptions = {}): Promise<RunningPlatform> {
  const runtime = await startRuntime(config, logger, options);
  const { server } = buildApp({ config, logger, runtime });
  let port: number;
  try {
    port = await server.listen(config.host, config.port);
  } catch (error) {
    await runtime.stop();
    throw error;
  }
  const origin = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  runtime.setListeningOrigin(origin);
  logger.info({ host: config.host, port, publicUrl: runtime.publicUrl() }, 'platform listening');
  let closing: Promise<void> | undefined;
  return {
    runtime,
    port,
    origin,
    close() {
      closing ??= (async () => {
        await server.close();
        await runtime.stop();
        logger.info('platform stopped');
      })();
      return closing;
    },
  };
}
