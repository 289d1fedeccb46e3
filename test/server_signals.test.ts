/**
 * Signals as supervisors and terminals send them, to the server started as the README starts it
 * (`npm start`, embedded database):
 * 1. SIGTERM to the npm process (what Docker, systemd or any supervisor sends) stops the server,
 *    which stops its database; npm exits 0 and no process it started is left running.
 * 2. SIGINT to the whole process group (a terminal's Ctrl-C) reaches the server alone: the
 *    database runs in a process group of its own, and the server stops it itself, last.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { descendants, isRunning, killLeftovers, postmasterPid, processGroup, spawnServer } from './helpers/server_process.js';

const dataDir = await mkdtemp(join(tmpdir(), 'ap-signals-'));
const started: number[] = [];
t.teardown(async () => {
  killLeftovers(started);
  await rm(dataDir, { recursive: true, force: true });
});

/** `npm start` in a process group of its own, listening; with every process it started. */
async function npmStart() {
  const server = spawnServer({ dataDir, npm: true, detached: true, env: { LOG_LEVEL: 'debug' } });
  const origin = await server.listening();
  const tree = descendants(server.child.pid!);
  started.push(server.child.pid!, ...tree);
  return { server, origin, tree, postgres: await postmasterPid(dataDir) };
}

const postgresSaid = (log: readonly { msg: string; postgres?: unknown }[], text: string): boolean =>
  log.some((line) => line.msg === 'embedded postgres' && String(line.postgres).includes(text));

t.test('SIGTERM to the npm process stops the server and its database', async (t) => {
  const { server, origin, tree, postgres } = await npmStart();
  t.equal((await fetch(`${origin}/health`)).status, 200);
  t.ok(tree.includes(postgres), 'the database is among the processes npm start started');

  process.kill(server.child.pid!, 'SIGTERM');
  const { code, signal } = await server.exited;
  t.same({ code, signal }, { code: 0, signal: null }, 'npm exits 0 once the server has stopped');
  t.same(tree.filter(isRunning), [], 'no process npm start started is left running');
  t.ok(postgresSaid(server.log, 'received fast shutdown request'), 'the database was shut down by request');
  t.ok(server.log.some((line) => line.msg === 'embedded PostgreSQL stopped'), 'the server stopped its database');
});

t.test("SIGINT to the process group (a terminal's Ctrl-C) reaches the server alone", async (t) => {
  const { server, tree, postgres } = await npmStart();
  const group = server.child.pid!;
  t.not(processGroup(postgres), group, 'the database is outside the terminal job');
  t.ok(tree.some((pid) => pid !== postgres && processGroup(pid) === group), 'the server is inside it');

  process.kill(-group, 'SIGINT');
  const { code } = await server.exited;
  t.equal(code, 0);
  t.same(tree.filter(isRunning), [], 'every process is gone');
  const stopped = server.log.findIndex((line) => line.msg === 'embedded PostgreSQL stopped');
  t.ok(stopped >= 0, 'the server stopped its database itself');
  t.notOk(server.log.some((line) => line.msg === 'embedded PostgreSQL exited'), 'the database did not stop on its own');
  t.ok(postgresSaid(server.log, 'database system is shut down'), 'the database shut down normally');
});
