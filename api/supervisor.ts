import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Config } from '../runtime/config.js';
import { StartupError } from '../runtime/errors.js';
import type { Logger } from '../runtime/logger.js';
import { prepareDatabase } from '../runtime/store/prepare.js';
import { probePort } from './http/server.js';
import { createMetricsGatherer } from './machine_metrics.js';
import { exitAfterLogs, handleStopSignals } from './signals.js';
import { ASK_START, READY, type WorkerStart } from './worker.js';

/**
 * WORKERS server processes on one port, on one database. The supervisor checks the port is free,
 * starts the embedded PostgreSQL (DATABASE_URL unset) and migrates, once; then starts the server
 * processes (api/worker.ts), which bind the port side by side (SO_REUSEPORT: the kernel spreads
 * the connections) and neither start a database nor migrate. The first serves alone until it is
 * ready: it settles at once what the start before left open, as a single process does.
 *
 * Each server process is in a process group of its own: a terminal's Ctrl-C reaches the
 * supervisor alone, which passes each stop signal on to every server process; once all have
 * stopped (each drains as a single process does) it stops the database. A server process that
 * exits otherwise is started again, after 1 s, 2 s, 5 s, 10 s, then every 30 s while it keeps
 * failing; its calls are settled by the others' sweep. A supervisor killed hard leaves its
 * server processes without a channel: each stops by itself, hurried, and the next start takes
 * the database over (store/embedded_orphan.ts). A scrape of `GET /metrics` on any server process
 * gets the figures of them all (api/machine_metrics.ts).
 */

export interface SupervisorOptions {
  /** The module each server process runs. @defaultValue api/worker.ts */
  readonly module?: string;
  /** The server processes' environment, which their configuration is read from. @defaultValue process.env */
  readonly env?: NodeJS.ProcessEnv;
  /** Messages of the server processes other than their own protocol's (a benchmark's). */
  onMessage?(index: number, message: unknown): void;
}

export interface Supervisor {
  readonly port: number;
  readonly databaseUrl: string;
  /** The server processes' PIDs by index (undefined while one waits to start again). */
  pids(): (number | undefined)[];
  /** Passes a stop signal on to every server process; the first one begins the stop. */
  signal(signal: NodeJS.Signals): void;
  /** Resolves once, after a stop, every server process has exited and the database has stopped. */
  readonly stopped: Promise<void>;
}

const RESTART_DELAYS_MS = [1_000, 2_000, 5_000, 10_000, 30_000];
/** A server process that ran this long before it exited starts again after the first delay. */
const STEADY_MS = 60_000;

interface Slot {
  child?: ChildProcess;
  startedAt: number;
  failures: number;
  /** It serves (said `ready`); cleared when it exits. */
  serving?: boolean;
  restart?: NodeJS.Timeout;
}

export async function startSupervisor(config: Config, logger: Logger, options: SupervisorOptions = {}): Promise<Supervisor> {
  const port = await probePort(config.host, config.port);
  const database = await prepareDatabase(config, logger);
  const module = options.module ?? fileURLToPath(new URL('./worker.ts', import.meta.url));
  const slots: Slot[] = Array.from({ length: config.workers }, () => ({ startedAt: 0, failures: 0 }));
  let running = false;
  let stopping = false;
  let finishing: Promise<void> | undefined;
  let stoppedResolve!: () => void;
  const stopped = new Promise<void>((resolve) => (stoppedResolve = resolve));
  const metrics = createMetricsGatherer(() => slots.flatMap((slot) => (slot.serving && slot.child?.connected ? [slot.child] : [])), slots.length, logger);

  const finish = (): void => {
    finishing ??= (async () => {
      await database.embedded?.stop();
      logger.info('all server processes and the database stopped');
      stoppedResolve();
    })();
  };

  /** Starts server process `index`; resolves once it serves, rejects if it exits first. */
  function start(index: number, exclusive: boolean): Promise<void> {
    const slot = slots[index]!;
    const child = fork(module, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], detached: true, env: options.env ?? process.env });
    slot.child = child;
    slot.startedAt = performance.now();
    const message: WorkerStart = { role: { index, databaseUrl: database.databaseUrl, embeddedDirectory: database.embeddedDirectory, exclusive }, port };
    return new Promise((resolve, reject) => {
      let ready = false;
      child.on('message', (said) => {
        if (said === ASK_START) child.send(message);
        else if (said === READY && !ready) {
          ready = true;
          slot.serving = true;
          logger.info({ worker: index, pid: child.pid }, 'server process ready');
          resolve();
        } else if (!metrics.handle(child, said)) options.onMessage?.(index, said);
      });
      child.once('exit', (code, signal) => {
        slot.child = undefined;
        slot.serving = false;
        if (!ready) reject(new StartupError(`Server process ${index} exited during start-up (${code ?? signal}); the line above says why`));
        exited(index, child.pid, code, signal);
      });
    });
  }

  function exited(index: number, pid: number | undefined, code: number | null, signal: NodeJS.Signals | null): void {
    if (stopping) {
      logger.info({ worker: index, pid, code, signal }, 'server process stopped');
      if (slots.every((slot) => !slot.child)) finish();
      return;
    }
    if (!running) return;
    const slot = slots[index]!;
    if (performance.now() - slot.startedAt >= STEADY_MS) slot.failures = 0;
    const delayMs = RESTART_DELAYS_MS[Math.min(slot.failures++, RESTART_DELAYS_MS.length - 1)]!;
    logger.error({ worker: index, pid, code, signal, restartInMs: delayMs }, 'a server process exited; starting it again');
    slot.restart = setTimeout(() => {
      slot.restart = undefined;
      if (!stopping) start(index, false).catch(() => undefined);
    }, delayMs);
  }

  function signal(name: NodeJS.Signals): void {
    stopping = true;
    for (const slot of slots) {
      clearTimeout(slot.restart);
      slot.child?.kill(name);
    }
    if (slots.every((slot) => !slot.child)) finish();
  }

  try {
    // The first alone: it settles what the start before left, while no sibling holds a call.
    await start(0, database.embedded !== undefined);
    await Promise.all(slots.slice(1).map((_, i) => start(i + 1, false)));
  } catch (error) {
    signal('SIGTERM');
    await stopped;
    throw error;
  }
  running = true;
  return { port, databaseUrl: database.databaseUrl, pids: () => slots.map((slot) => slot.child?.pid), signal, stopped };
}

/** `npm start` with WORKERS above 1: the supervisor until it has stopped, then exit. */
export async function supervise(config: Config, logger: Logger): Promise<void> {
  let supervisor: Supervisor | undefined;
  const early: NodeJS.Signals[] = [];
  const pass = (name: NodeJS.Signals) => (supervisor ? supervisor.signal(name) : early.push(name));
  handleStopSignals(logger, config.shutdownGraceMs, {
    stop: pass,
    hurry: pass,
    exit: (name) => {
      supervisor?.signal(name);
      exitAfterLogs(logger, 130);
    },
  });
  try {
    supervisor = await startSupervisor(config, logger);
  } catch (error) {
    if (error instanceof StartupError) process.stderr.write(`${error.message}\n`);
    else logger.fatal({ err: error }, 'start-up failed');
    exitAfterLogs(logger, 1);
    return;
  }
  logger.info({ pid: process.pid, port: supervisor.port, workers: config.workers, pids: supervisor.pids() }, 'server processes started');
  for (const name of early) supervisor.signal(name);
  await supervisor.stopped;
  exitAfterLogs(logger, 0);
}
