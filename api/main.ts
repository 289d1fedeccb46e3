import { ConfigError, loadConfig } from '../runtime/config.js';
import { StartupError } from '../runtime/errors.js';
import { createLogger } from '../runtime/logger.js';
import { startupBlock, startupFacts } from '../runtime/startup.js';
import { startPlatform, type RunningPlatform } from './platform.js';

/**
 * Entry point: read the configuration, start everything, stop in order on SIGTERM or SIGINT.
 * A second signal cuts the stop's grace and goodbyes short (the ends of calls are still saved); a
 * third exits at once, leaving what is open to the next start's sweep.
 */

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
let platform: RunningPlatform | undefined;
let signals = 0;
let hurry!: () => void;
const hurried = new Promise<void>((resolve) => (hurry = resolve));

/**
 * Exits once the log lines written so far have reached stdout: pino writes asynchronously, and a
 * line still on its way at `process.exit` could be lost, or overtaken by the lines flushed then.
 */
function exit(code: number): void {
  logger.flush(() => process.exit(code));
  setTimeout(() => process.exit(code), 1_000).unref();
}

function stop(): void {
  platform!.close({ hurry: hurried }).then(
    () => exit(0),
    (error: unknown) => {
      logger.error({ err: error }, 'the stop failed');
      exit(1);
    },
  );
}

/**
 * One Ctrl-C under `npm start` arrives twice, a few milliseconds apart: from the terminal, and
 * forwarded by npm. Signals closer together than this count as one.
 */
const SAME_SIGNAL_MS = 1_000;
let lastSignalAt = -Infinity;

// Taken before start-up, so a signal while the database starts still stops in order once it is up.
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    const now = performance.now();
    if (now - lastSignalAt < SAME_SIGNAL_MS) return;
    lastSignalAt = now;
    signals++;
    if (signals === 1) {
      logger.info({ signal, graceSeconds: config.shutdownGraceMs / 1000 }, 'shutting down: live calls may finish; send the signal again to end them now');
      if (platform) stop();
    } else if (signals === 2) {
      logger.warn({ signal }, 'second signal: ending the live calls now (their ends are still saved)');
      hurry();
    } else {
      logger.error({ signal }, 'third signal: exiting at once; what is still open is settled by the next start');
      exit(130);
    }
  });
}

try {
  platform = await startPlatform(config, logger);
} catch (error) {
  if (error instanceof StartupError) process.stderr.write(`${error.message}\n`);
  else logger.fatal({ err: error }, 'start-up failed');
  exit(1);
}
if (platform) {
  if (process.stderr.isTTY) process.stderr.write(startupBlock(startupFacts(config, platform.runtime.publicUrl(), platform.runtime.embeddedDirectory)));
  if (signals > 0) stop();
}
