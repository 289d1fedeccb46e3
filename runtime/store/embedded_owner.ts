import { createHash } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';
import { basename, dirname } from 'node:path';
import { StartupError } from '../errors.js';

/**
 * One live process owns an embedded cluster directory.
 *
 * The owner listens on a Linux abstract Unix socket named after the directory (its parent's device
 * and inode, and its name). Binding is atomic, and the kernel frees the name when the owner exits
 * in any way, SIGKILL included: there is no stale lock to judge and no recycled PID to mistake
 * for an owner, and of two starts at the same moment exactly one wins. A process that finds the
 * name taken asks the owner who it is, to name it in the refusal.
 *
 * Abstract sockets are per network namespace: two containers sharing one DATA_DIR do not see
 * each other (nor do PostgreSQL's own checks); the embedded database is not for shared volumes.
 */

export interface DirectoryOwnership {
  /** Frees the directory for the next owner; idempotent. */
  release(): Promise<void>;
}

interface OwnerIdentity {
  readonly pid: number;
  readonly startedAt: string;
  readonly command: string;
}

const ASK_TIMEOUT_MS = 2_000;

function identity(): OwnerIdentity {
  const startedAt = new Date(Date.now() - Math.round(process.uptime() * 1000)).toISOString().replace(/\.\d+Z$/, 'Z');
  const command = [basename(process.argv0), ...process.execArgv, ...process.argv.slice(1)].join(' ');
  return { pid: process.pid, startedAt, command: command.length > 120 ? `${command.slice(0, 117)}...` : command };
}

async function socketName(directory: string): Promise<string> {
  const { dev, ino } = await stat(dirname(directory));
  const key = createHash('sha256').update(`${dev}:${ino}:${basename(directory)}`).digest('hex').slice(0, 40);
  return `\0assistant-platform/${key}`;
}

function listen(server: Server, name: string): Promise<void> {
  return new Promise((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(name, () => {
      server.off('error', reject);
      resolveListen();
    });
  });
}

/** The owner's identity; `undefined` when nobody answers (the owner just left); `null` when it does not say in time. */
function askOwner(name: string): Promise<OwnerIdentity | undefined | null> {
  return new Promise((resolveAsk) => {
    const socket = createConnection(name);
    let answer = '';
    const timer = setTimeout(() => (socket.destroy(), resolveAsk(null)), ASK_TIMEOUT_MS);
    const settle = (value: OwnerIdentity | undefined | null): void => {
      clearTimeout(timer);
      socket.destroy();
      resolveAsk(value);
    };
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString();
      if (answer.length > 4096) settle(null);
    });
    socket.on('end', () => {
      try {
        settle(JSON.parse(answer) as OwnerIdentity);
      } catch {
        settle(null);
      }
    });
    socket.on('error', (error: NodeJS.ErrnoException) => settle(error.code === 'ECONNREFUSED' || error.code === 'ENOENT' ? undefined : null));
  });
}

/**
 * Makes this process the owner of `directory` (whose parent must exist), or throws a
 * `StartupError` naming the live owner. Off Linux there are no abstract sockets and ownership is
 * not checked.
 */
export async function claimDirectory(directory: string): Promise<DirectoryOwnership> {
  if (process.platform !== 'linux') return { release: async () => undefined };
  const name = await socketName(directory);
  const me = identity();
  for (let attempt = 0; ; attempt++) {
    const server = createServer((socket) => socket.end(`${JSON.stringify(me)}\n`));
    try {
      await listen(server, name);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      const owner = await askOwner(name);
      if (owner === undefined && attempt < 3) continue;
      const who = owner ? `process ${owner.pid} (${owner.command}, started ${owner.startedAt})` : 'another running process';
      throw new StartupError(`The embedded database in ${directory} is in use by ${who}: stop that process first or set DATA_DIR to another directory`);
    }
    server.unref();
    let released: Promise<void> | undefined;
    return {
      release: () => (released ??= new Promise((resolveClose) => server.close(() => resolveClose()))),
    };
  }
}
