import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { get } from 'node:http';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { isRunning } from '../../runtime/store/embedded_orphan.js';

/**
 * The server as operators run it: a child process started by `node api/main.ts` or by the
 * README's `npm start`, on the embedded database under its own DATA_DIR. Its JSON log lines are
 * collected from stdout (other lines, like npm's banner, are skipped) and its stderr kept whole.
 */

export { isRunning };

export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export interface ServerProcess {
  readonly child: ChildProcess;
  /** Every JSON log line written so far, in order. */
  readonly log: readonly LogLine[];
  /** Everything written to stderr so far. */
  stderr(): string;
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>;
  /** The first log line with this message (or that `match` accepts); rejects if the process exits before writing it. */
  line(msg: string | ((line: LogLine) => boolean)): Promise<LogLine>;
  /** `http://127.0.0.1:PORT` once the server listens; rejects if it exits first. */
  listening(): Promise<string>;
}

export interface ServerProcessOptions {
  readonly dataDir: string;
  /** Through `npm start`, as the README runs it, instead of `node` directly. */
  readonly npm?: boolean;
  /** In a process group of its own, as a terminal's job is: `process.kill(-pid, signal)` reaches all of it. */
  readonly detached?: boolean;
  readonly env?: Readonly<Record<string, string>>;
}

export function spawnServer(options: ServerProcessOptions): ServerProcess {
  const [command, args] = options.npm ? ['npm', ['start']] : [process.execPath, ['--import', 'tsx', 'api/main.ts']];
  const child = spawn(command, args, {
    env: { ...process.env, PORT: '0', DATA_DIR: options.dataDir, DATABASE_URL: '', LOG_LEVEL: 'info', DEV_VOICE: 'tone', WORKERS: '1', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const log: LogLine[] = [];
  const waiting = new Set<{ match: (line: LogLine) => boolean; found: (line: LogLine) => void }>();
  createInterface({ input: child.stdout! }).on('line', (text) => {
    if (!text.startsWith('{')) return;
    const line = JSON.parse(text) as LogLine;
    log.push(line);
    for (const waiter of waiting) {
      if (!waiter.match(line)) continue;
      waiting.delete(waiter);
      waiter.found(line);
    }
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));

  const line = (msg: string | ((line: LogLine) => boolean)): Promise<LogLine> =>
    new Promise((resolve, reject) => {
      const match = typeof msg === 'string' ? (entry: LogLine) => entry.msg === msg : msg;
      const seen = log.find(match);
      if (seen) return resolve(seen);
      waiting.add({ match, found: resolve });
      void exited.then(({ code, signal }) => reject(new Error(`server exited (${code ?? signal}) before logging "${String(msg)}": ${stderr.trim()}`)));
    });
  return {
    child,
    log,
    stderr: () => stderr,
    exited,
    line,
    listening: async () => `http://127.0.0.1:${(await line('platform listening')).port as number}`,
  };
}

/** GET over a connection of its own: with several server processes on one port, the kernel picks one for each. */
export function getFresh(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

/** Polls `probe` every 20 ms until it returns a value; fails after `withinMs`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, withinMs = 30_000): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** The PID of the PostgreSQL server holding the cluster of `dataDir`, from its `postmaster.pid`. */
export async function postmasterPid(dataDir: string): Promise<number> {
  return Number((await readFile(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

interface ProcStat {
  readonly ppid: number;
  readonly pgrp: number;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), pgrp: Number(fields[2]) };
  } catch {
    return undefined;
  }
}

/** The process group of `pid`. */
export function processGroup(pid: number): number | undefined {
  return procStat(pid)?.pgrp;
}

/** Every live process below `pid` in the process tree (Linux `/proc`). */
export function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    const child = Number(name);
    const stat = Number.isInteger(child) ? procStat(child) : undefined;
    if (stat) parents.set(child, stat.ppid);
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.shift()!;
    for (const [child, ppid] of parents) if (ppid === parent) (found.push(child), queue.push(child));
  }
  return found;
}

/** SIGKILLs those of `pids` still running: a test's clean-up after a failure. */
export function killLeftovers(pids: readonly number[]): void {
  for (const pid of pids) if (isRunning(pid)) process.kill(pid, 'SIGKILL');
}

export interface RunningServer extends ServerProcess {
  readonly origin: string;
  /** The server's own process (from its log): `npm start` execs it under the npm process. */
  readonly pid: number;
  /** REST under `/api`, JSON both ways; `token` as a bearer. */
  api<T = any>(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: T; headers: Headers }>;
}

/**
 * `spawnServer` that resolves once the server listens. A test that ends with it running SIGKILLs
 * it and everything it started (npm, the server under it, its embedded PostgreSQL in a session of
 * its own): killing npm alone would leave the server running with no parent.
 */
export async function startServer(t: { teardown(fn: () => unknown): void }, options: ServerProcessOptions): Promise<RunningServer> {
  const server = spawnServer(options);
  t.teardown(() => {
    const { child } = server;
    if (child.exitCode !== null || child.signalCode !== null) return;
    killLeftovers([...descendants(child.pid!), child.pid!]);
  });
  const listening = await server.line('platform listening');
  const origin = `http://127.0.0.1:${listening.port as number}`;
  async function api<T>(method: string, path: string, body?: unknown, token?: string) {
    const response = await fetch(`${origin}/api${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: (text && (response.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text) as T, headers: response.headers };
  }
  return { ...server, origin, pid: listening.pid as number, api };
}

/** The superuser URL of the embedded PostgreSQL a running server started under `dataDir`. */
export async function embeddedUrl(server: ServerProcess, dataDir: string): Promise<string> {
  const started = await server.line('embedded PostgreSQL started');
  const password = (await readFile(join(dataDir, 'postgres.password'), 'utf8')).trim();
  return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${started.port as number}/assistant_platform`;
}
