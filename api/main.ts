import { ConfigError, loadConfig } from '../runtime/config.js';
import { StartupError } from '../runtime/errors.js';
import { createLogger } from '../runtime/logger.js';
import { startPlatform } from './platform.js';

/** Entry point: read the configuration, start everything, stop gracefully on SIGTERM/SIGINT. */

let config;
try {
  config = loadConfig();
} catch (error) {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  throw error;
}

const logger = createLogger(config.logLevel);
const platform = await startPlatform(config, logger).catch((error: unknown) => {
  if (error instanceof StartupError) process.stderr.write(`${error.message}\n`);
  else logger.fatal({ err: error }, 'start-up failed');
  process.exit(1);
});

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    platform.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}
