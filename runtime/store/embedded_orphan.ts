import { readFile, readlink, realpath, unlink } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { StartupError } from '../errors.js';
import type { Logger } from '../logger.js';

/**
 * A `postmaster.pid` left in a cluster directory this process owns (see embedded_owner.ts) by a
 * server that did not stop it. What it names decides what start-up does:
 * - no live process: nothing; PostgreSQL clears a dead server's file itself;
 * - PostgreSQL serving this directory (its executable is `postgres` and its working directory,
 *   which the postmaster sets to its data directory, is this one): the orphan of an earlier
 *   process that died hard; it is stopped (fast shutdown, then immediate), within bounds;
 * - anything else (a PID reused after a host or container restart, another user's process):
 *   left alone; the file is removed, since PostgreSQL refuses to start while its PID lives.
 */

/** How long an orphan gets for a fast shutdown before an immediate one. */
const FAST_SHUTDOWN_MS = 30_000;
/** How long an immediate shutdown may take before start-up gives up. */
const IMMEDIATE_SHUTDOWN_MS = 10_000;

/** True for a process that exists and has not exited; a zombie has exited. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    // `pid (comm) S ...`: the state follows the last parenthesis.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}

async function servesDirectory(pid: number, directory: string): Promise<boolean> {
  try {
    const [exe, cwd, own] = await Promise.all([readlink(`/proc/${pid}/exe`), readlink(`/proc/${pid}/cwd`), realpath(directory)]);
    return basename(exe.replace(/ \(deleted\)$/, '')) === 'postgres' && cwd === own;
  } catch {
    return false;
  }
}

async function stopped(pid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (isRunning(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

/** Deals with a leftover server of `directory` as described above; throws `StartupError` when an orphan will not stop. */
export async function clearLeftoverServer(directory: string, logger: Logger): Promise<void> {
  const pidFile = join(directory, 'postmaster.pid');
  const content = await readFile(pidFile, 'utf8').catch(() => undefined);
  const pid = Number(content?.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isRunning(pid)) return;
  if (!(await servesDirectory(pid, directory))) {
    logger.warn({ pid, pidFile }, 'ignoring a stale postmaster.pid: the process it names is not the PostgreSQL of this directory');
    await unlink(pidFile);
    return;
  }
  logger.warn({ pid }, 'stopping a PostgreSQL server left running by an earlier process');
  process.kill(pid, 'SIGINT');
  if (await stopped(pid, FAST_SHUTDOWN_MS)) return;
  logger.warn({ pid }, 'the orphaned PostgreSQL did not finish a fast shutdown in time; shutting it down immediately');
  process.kill(pid, 'SIGQUIT');
  if (await stopped(pid, IMMEDIATE_SHUTDOWN_MS)) return;
  throw new StartupError(`PostgreSQL process ${pid}, left running on ${directory} by an earlier process, does not stop: end it (kill -KILL ${pid}) and start again`);
}
