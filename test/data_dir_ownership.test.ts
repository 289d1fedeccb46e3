/**
 * One server per DATA_DIR, and start-up touches only what is its own:
 * 1. a second start on a DATA_DIR in use refuses in one line naming the running process (exit 1);
 *    the first keeps serving on the same PostgreSQL process.
 * 2. two starts at the same moment on a fresh DATA_DIR: one serves, the other refuses in one line.
 * 3. a stale postmaster.pid naming a live process that is not this PostgreSQL (even one working
 *    in the cluster directory): the process is left alone, the server starts and says so once.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { isRunning, killLeftovers, postmasterPid, spawnServer, type ServerProcess } from './helpers/server_process.js';

const root = await mkdtemp(join(tmpdir(), 'ap-ownership-'));
// Run as root, PostgreSQL runs as the OS user `postgres`, which must pass through this directory.
await chmod(root, 0o711);
const started: number[] = [];
t.teardown(async () => {
  killLeftovers(started);
  await rm(root, { recursive: true, force: true });
});

function server(dataDir: string): ServerProcess {
  const running = spawnServer({ dataDir });
  started.push(running.child.pid!);
  return running;
}

async function stop(running: ServerProcess): Promise<void> {
  running.child.kill('SIGTERM');
  await running.exited;
}

const post = (origin: string, path: string, body: unknown) =>
  fetch(`${origin}/api${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

const IN_USE = /^The embedded database in (\S+) is in use by process (\d+) \(.*api\/main\.ts, started [0-9T:-]+Z\): stop that process first or set DATA_DIR to another directory\n$/;

t.test('a second start on a DATA_DIR in use is refused and touches nothing', async (t) => {
  const dataDir = join(root, 'shared');
  const first = server(dataDir);
  const origin = await first.listening();
  t.equal((await post(origin, '/auth/register', { name: 'First', email: 'first@example.com', password: 'password123' })).status, 201);
  const database = await postmasterPid(dataDir);

  const second = server(dataDir);
  const { code, signal } = await second.exited;
  t.same({ code, signal }, { code: 1, signal: null }, 'the second start exits 1');
  const refusal = IN_USE.exec(second.stderr());
  t.ok(refusal, `one line naming the running process: ${second.stderr()}`);
  t.equal(Number(refusal?.[2]), first.child.pid, 'the running server is named');
  t.equal(refusal?.[1], join(dataDir, 'postgres'));
  t.same(second.log, [], 'nothing else is written');

  t.ok(isRunning(database), "the first server's database still runs");
  t.equal(await postmasterPid(dataDir), database, 'and still holds the directory');
  const login = await post(origin, '/auth/login', { email: 'first@example.com', password: 'password123' }).catch(async (error: unknown) => {
    throw new Error(`first server unreachable; it exited: ${JSON.stringify(await Promise.race([first.exited, Promise.resolve('running')]))} ${first.stderr()}`, { cause: error });
  });
  t.equal(login.status, 200, 'the first server keeps serving');
  await stop(first);
});

t.test('of two starts at the same moment, one serves and the other is refused', async (t) => {
  const dataDir = join(root, 'race');
  const both = [server(dataDir), server(dataDir)];
  const outcomes = await Promise.all(
    both.map((running) => Promise.race([running.line('platform listening').then(() => 'serves'), running.exited.then(({ code }) => `exit ${code}`)])),
  );
  t.same([...outcomes].sort(), ['exit 1', 'serves']);
  const winner = both[outcomes.indexOf('serves')]!;
  const loser = both[outcomes.indexOf('exit 1')]!;
  t.equal(Number(IN_USE.exec(loser.stderr())?.[2]), winner.child.pid, 'the refusal names the server that won');
  t.equal((await fetch(`${await winner.listening()}/health`)).status, 200);
  await stop(winner);
});

t.test('a stale postmaster.pid naming a live stranger leaves it alone', async (t) => {
  const dataDir = join(root, 'shared');
  const cluster = join(dataDir, 'postgres');
  const first = server(dataDir);
  await first.listening();
  const lockFile = await readFile(join(cluster, 'postmaster.pid'), 'utf8');
  await stop(first);

  // What a host restart can leave: the PID in the file now belongs to another program. This one
  // even works in the cluster directory, and dies of the SIGINT that would stop a PostgreSQL.
  const stranger = spawn('sleep', ['600'], { cwd: cluster, stdio: 'ignore' });
  started.push(stranger.pid!);
  await writeFile(join(cluster, 'postmaster.pid'), lockFile.replace(/^\d+/, String(stranger.pid)));

  const second = server(dataDir);
  t.equal((await fetch(`${await second.listening()}/health`)).status, 200, 'the server starts');
  t.ok(isRunning(stranger.pid!), 'the stranger is still running');
  const notes = second.log.filter((line) => /postmaster\.pid/.test(line.msg));
  t.equal(notes.length, 1, 'one log line says the file was ignored');
  t.equal(notes[0]?.pid, stranger.pid);
  t.not(await postmasterPid(dataDir), stranger.pid, "the server's own PostgreSQL holds the directory");
  await stop(second);
  t.ok(isRunning(stranger.pid!), 'the stranger survives the stop as well');
  stranger.kill('SIGKILL');
});
