import { execFile, spawn } from 'node:child_process';
import { chmod, mkdir, stat } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { StartupError } from '../errors.js';

/**
 * Who runs the embedded PostgreSQL and whether it can reach what it needs. Every refusal here is
 * a `StartupError` whose message names the directory in the way and what to change.
 */

const execFileAsync = promisify(execFile);

/** The OS user PostgreSQL runs as; empty when it is this process's own user. */
export interface OsUser {
  readonly uid?: number;
  readonly gid?: number;
}

/** PostgreSQL refuses to run as root, so as root the server runs as the OS user `postgres`. */
export async function serverUser(): Promise<OsUser> {
  if (userInfo().uid !== 0) return {};
  const lookup = async (): Promise<OsUser> => {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', 'postgres']), execFileAsync('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  try {
    return await lookup();
  } catch {
    await execFileAsync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    return lookup();
  }
}

/** Creates `path` and its parents for this process, or refuses in one line when it may not. */
export async function makeDirectory(path: string, mode?: number): Promise<void> {
  try {
    await mkdir(path, { recursive: true, mode });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EPERM' && code !== 'EROFS' && code !== 'ENOTDIR' && code !== 'EEXIST') throw error;
    throw new StartupError(`Cannot create ${path} (${code}): set DATA_DIR to a directory the user ${userInfo().username} can write`, { cause: error });
  }
}

/** `path` and every directory above it, root first. */
function ancestry(path: string): string[] {
  const chain = [path];
  while (dirname(chain[0]!) !== chain[0]) chain.unshift(dirname(chain[0]!));
  return chain;
}

/**
 * Checks, as `user`, each `x:path` (may be searched or executed) and `r:path` (may be read), in
 * order; resolves to the first that fails. The check runs as PostgreSQL will (libuv drops the
 * supplementary groups of a child it starts as another user), so ACLs and groups count as they
 * will for it.
 */
async function firstBlocked(user: OsUser, checks: readonly string[]): Promise<string | undefined> {
  const script = 'for p do case $p in x:*) [ -x "${p#x:}" ];; r:*) [ -r "${p#r:}" ];; esac || { printf %s "${p#?:}"; exit 1; }; done';
  return new Promise((resolveCheck, reject) => {
    const child = spawn('/bin/sh', ['-c', script, 'sh', ...checks], { ...user, stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolveCheck(undefined) : code === 1 && output ? resolveCheck(output) : reject(new Error(`access check as the PostgreSQL user exited with ${code}`))));
  });
}

async function describe(path: string): Promise<string> {
  const mode = await stat(path).then((s) => (s.mode & 0o7777).toString(8), () => undefined);
  return mode ? `${path} (mode ${mode})` : path;
}

/**
 * As root, PostgreSQL runs as `user` and must reach its binaries under `native` and pass through
 * every directory above the cluster `directory`. The cluster's parent (DATA_DIR, which the
 * platform owns) is opened for passing through (o+x) when it is closed; no other directory is
 * changed: one that is in the way is named in the refusal.
 */
export async function checkServerAccess(user: OsUser, native: string, directory: string): Promise<void> {
  if (user.uid === undefined) return;
  const parent = dirname(directory);
  const { mode } = await stat(parent);
  if ((mode & 0o001) === 0) await chmod(parent, (mode & 0o7777) | 0o001);

  const binaries = [
    ...ancestry(native).map((path) => `x:${path}`),
    ...['bin', 'lib', 'share'].map((name) => `x:${join(native, name)}`),
    `x:${join(native, 'bin', 'postgres')}`,
    `x:${join(native, 'bin', 'initdb')}`,
  ];
  const blockedBinary = await firstBlocked(user, binaries);
  if (blockedBinary) {
    throw new StartupError(
      `PostgreSQL runs as the OS user postgres (this server runs as root) and cannot reach its binaries in ${native}: ` +
        `${await describe(blockedBinary)} is in the way; install the platform where that user can read it (for example under /opt), ` +
        'run the server as an unprivileged user, or set DATABASE_URL',
    );
  }
  const blockedData = await firstBlocked(user, ancestry(parent).map((path) => `x:${path}`));
  if (blockedData) {
    throw new StartupError(
      `PostgreSQL runs as the OS user postgres (this server runs as root) and cannot pass through ${await describe(blockedData)} ` +
        `to reach ${directory}: set DATA_DIR to a directory that user can reach, such as /var/lib/assistant-platform, ` +
        'or run the server as an unprivileged user',
    );
  }
}
