import type { Logger } from '../runtime/logger.js';

/**
 * The stop signals of a server or supervisor process: the first SIGTERM or SIGINT stops in order,
 * a second cuts the stop's grace and goodbyes short (the ends of calls are still saved), a third
 * exits at once, leaving what is open to the next start's sweep.
 */
export interface StopSteps {
  stop(signal: NodeJS.Signals): void;
  hurry(signal: NodeJS.Signals): void;
  exit(signal: NodeJS.Signals): void;
}

/**
 * One Ctrl-C under `npm start` arrives twice, a few milliseconds apart: from the terminal, and
 * forwarded by npm. Signals closer together than this count as one.
 */
const SAME_SIGNAL_MS = 1_000;

/** Takes SIGTERM and SIGINT for good; returns a way to count one more as if it had arrived. */
export function handleStopSignals(logger: Logger, graceMs: number, steps: StopSteps): (signal: NodeJS.Signals) => void {
  let signals = 0;
  let lastSignalAt = -Infinity;
  const count = (signal: NodeJS.Signals): void => {
    const now = performance.now();
    if (now - lastSignalAt < SAME_SIGNAL_MS) return;
    lastSignalAt = now;
    signals++;
    if (signals === 1) {
      logger.info({ signal, graceSeconds: graceMs / 1000 }, 'shutting down: live calls may finish; send the signal again to end them now');
      steps.stop(signal);
    } else if (signals === 2) {
      logger.warn({ signal }, 'second signal: ending the live calls now (their ends are still saved)');
      steps.hurry(signal);
    } else {
      logger.error({ signal }, 'third signal: exiting at once; what is still open is settled by the next start');
      steps.exit(signal);
    }
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => count(signal));
  return count;
}

/**
 * Exits once the log lines written so far have reached stdout: pino writes asynchronously, and a
 * line still on its way at `process.exit` could be lost, or overtaken by the lines flushed then.
 */
export function exitAfterLogs(logger: Logger, code: number): void {
  logger.flush(() => process.exit(code));
  setTimeout(() => process.exit(code), 1_000).unref();
}
