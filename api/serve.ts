import { ConfigError, loadConfig, type Config } from '../runtime/config.js';
import { StartupError } from '../runtime/errors.js';
import type { Logger } from '../runtime/logger.js';
import type { RuntimeOptions, ServerRole } from '../runtime/platform.js';
import { startupBlock, startupFacts } from '../runtime/startup.js';
import { startPlatform, type RunningPlatform } from './platform.js';
import { exitAfterLogs, handleStopSignals } from './signals.js';

export interface ServeOptions {
  /** One of a supervisor's server processes (WORKERS above 1). */
  readonly role?: ServerRole;
  /** `GET /metrics`'s exposition: the machine's, for a supervisor's server process. @defaultValue this process's own */
  readonly scrapeMetrics?: () => Promise<string>;
  readonly runtime?: RuntimeOptions;
  /** The server listens and serves. */
  onListening?(platform: RunningPlatform): void;
  /** Settles when no one is left to stop this process (its supervisor died): it stops at once, hurried. */
  readonly abandoned?: Promise<void>;
}

/** One server process, from start to exit: start everything, stop in order on SIGTERM or SIGINT (see signals.ts), exit 0 once stopped. */
export async function serve(config: Config, logger: Logger, options: ServeOptions = {}): Promise<void> {
  let platform: RunningPlatform | undefined;
  let stopAsked = false;
  let hurry!: () => void;
  const hurried = new Promise<void>((resolve) => (hurry = resolve));
  const stop = (): void => {
    platform!.close({ hurry: hurried }).then(
      () => exitAfterLogs(logger, 0),
      (error: unknown) => {
        logger.error({ err: error }, 'the stop failed');
        exitAfterLogs(logger, 1);
      },
    );
  };
  // Taken before start-up, so a signal while the database starts still stops in order once it is up.
  handleStopSignals(logger, config.shutdownGraceMs, {
    stop: () => {
      stopAsked = true;
      if (platform) stop();
    },
    hurry: () => hurry(),
    exit: () => exitAfterLogs(logger, 130),
  });
  void options.abandoned?.then(() => {
    logger.error('the supervisor is gone: stopping now, hurried');
    hurry();
    stopAsked = true;
    if (platform) stop();
  });
  try {
    platform = await startPlatform(config, logger, options.runtime, options.role, options.scrapeMetrics);
  } catch (error) {
    if (error instanceof StartupError) process.stderr.write(`${error.message}\n`);
    else logger.fatal({ err: error }, 'start-up failed');
    exitAfterLogs(logger, 1);
    return;
  }
  options.onListening?.(platform);
  // One block for the terminal, however many server processes.
  if ((options.role?.index ?? 0) === 0 && process.stderr.isTTY) process.stderr.write(startupBlock(startupFacts(config, platform.runtime.publicUrl(), platform.runtime.embeddedDirectory)));
  if (stopAsked) stop();
}

/** The configuration from the environment; a bad value exits with one line naming the variable. */
export function configOrExit(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
