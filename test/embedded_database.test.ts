/**
 * The server on its embedded defaults, run as `npm start` runs it (a child process, no DATABASE_URL):
 * 1. first start initialises PostgreSQL under DATA_DIR, migrates and serves.
 * 2. SIGTERM stops gracefully (exit 0) and stops the database; a second start keeps the data.
 * 3. a server killed outright leaves its database running; the next start takes over the cluster.
 * 4. a process that exits without stopping its database (process.exit after a failure) asks it to stop.
 * 5. migrations are recorded and applying them again changes nothing.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLogger } from '../runtime/logger.js';
import { loadMigrations, migrate } from '../runtime/store/migrate.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { isRunning as alive, killLeftovers, postmasterPid as clusterPid, spawnServer, until, type ServerProcess } from './helpers/server_process.js';

const dataDir = await mkdtemp(join(tmpdir(), 'ap-embedded-'));
const started: number[] = [];
t.teardown(async () => {
  killLeftovers(started);
  await rm(dataDir, { recursive: true, force: true });
});

async function start(): Promise<ServerProcess & { readonly origin: string }> {
  const server = spawnServer({ dataDir });
  started.push(server.child.pid!);
  return Object.assign(server, { origin: await server.listening() });
}

const exitCode = async (server: ServerProcess): Promise<number | null> => (await server.exited).code;

const post = (origin: string, path: string, body: unknown) =>
  fetch(`${origin}/api${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

const postmasterPid = () => clusterPid(dataDir);

t.test('data survives a graceful restart', async (t) => {
  const first = await start();
  t.equal((await fetch(`${first.origin}/health`)).status, 200);
  t.equal((await post(first.origin, '/auth/register', { name: 'Kept', email: 'kept@example.com', password: 'password123' })).status, 201);
  const pid = await postmasterPid();
  first.child.kill('SIGTERM');
  t.equal(await exitCode(first), 0, 'graceful exit');
  t.notOk(alive(pid), 'embedded database stopped with the server');

  const second = await start();
  const login = await post(second.origin, '/auth/login', { email: 'kept@example.com', password: 'password123' });
  t.equal(login.status, 200, 'the user is still there');
  second.child.kill('SIGINT');
  t.equal(await exitCode(second), 0);
});

t.test('a killed server leaves a database the next start takes over', async (t) => {
  const first = await start();
  const pid = await postmasterPid();
  started.push(pid);
  first.child.kill('SIGKILL');
  await first.exited;
  t.ok(alive(pid), 'the orphaned database is still running');

  const second = await start();
  t.notOk(alive(pid), 'the orphan was stopped');
  t.ok(second.log.some((line) => line.msg === 'stopping a PostgreSQL server left running by an earlier process' && line.pid === pid), 'after it was recognised');
  const login = await post(second.origin, '/auth/login', { email: 'kept@example.com', password: 'password123' });
  t.equal(login.status, 200);
  second.child.kill('SIGTERM');
  t.equal(await exitCode(second), 0);
});

t.test('a process that exits without stopping its database takes it along', async (t) => {
  const script = `
    import { readFileSync } from 'node:fs';
    import { createLogger } from './runtime/logger.ts';
    import { startEmbeddedPostgres } from './runtime/store/embedded.ts';
    await startEmbeddedPostgres({ directory: process.env.CLUSTER, logger: createLogger('silent') });
    console.log(readFileSync(process.env.CLUSTER + '/postmaster.pid', 'utf8').split('\\n')[0]);
    process.exit(3);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    env: { ...process.env, CLUSTER: join(dataDir, 'postgres') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise((resolve) => child.once('exit', resolve));
  t.equal(code, 3);
  const pid = Number(output.trim());
  started.push(pid);
  t.ok(pid > 0, 'the database had started');
  await until('the abandoned database to stop', () => (alive(pid) ? undefined : true));
  t.pass('it stopped');
});

t.test('migrations are recorded and idempotent', async (t) => {
  const url = await freshDatabase();
  const logger = createLogger('silent');
  t.same(await migrate(url, logger), [], 'the template is already migrated');
  const names = (await loadMigrations()).map((m) => m.name);
  const recorded = await withClient(url, async (db) => (await db.query('SELECT name FROM schema_migrations ORDER BY name')).rows.map((r) => r.name));
  t.same(recorded, names);
  t.same(await migrate(url, logger), [], 'second run applies nothing');

  const edited = (await loadMigrations()).map((m, i) => (i === 0 ? { ...m, checksum: 'changed' } : m));
  await t.rejects(migrate(url, logger, edited), /was changed after it was applied/);
});
