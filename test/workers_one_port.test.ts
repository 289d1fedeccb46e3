/**
 * `WORKERS=2` as operators run it (`node api/main.ts`, embedded database, a fresh DATA_DIR):
 * 1. the supervisor starts the database and migrates once; two server processes listen on the
 *    one port and both answer it (each names itself in its metrics and log lines);
 * 2. /metrics, whichever process takes the scrape, answers the figures of both, each series
 *    labelled with its process: a request counted by either shows in every scrape; the loopback
 *    rule is still the taking process's;
 * 3. a server process killed with SIGKILL is started again by the supervisor, and the port
 *    answers meanwhile (its metrics say one process is missing);
 * 4. SIGTERM to the supervisor stops every server process, then the database; nothing is left;
 * 5. a supervisor killed with SIGKILL: its server processes stop by themselves, and the next start
 *    takes over the database it left running.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { descendants, getFresh, isRunning, killLeftovers, postmasterPid, spawnServer, until, type LogLine, type ServerProcess } from './helpers/server_process.js';

const dataDir = await mkdtemp(join(tmpdir(), 'ap-workers-'));
const started: number[] = [];
t.teardown(async () => {
  killLeftovers(started);
  await rm(dataDir, { recursive: true, force: true });
});

/** How many scrapes of /metrics each process (by `worker` label) answered, as one scrape shows them. */
function scrapesAnswered(exposition: string): Map<string, number> {
  const counts = /^http_request_duration_seconds_count\{route="\/metrics",method="GET",status="200",worker="(\d+)"\} (\d+)$/gm;
  return new Map([...exposition.matchAll(counts)].map((match) => [match[1]!, Number(match[2])]));
}

/** The `worker` labels of the processes that answered scrapes of /metrics, scraping up to `count` times until both have. */
async function answeringWorkers(origin: string, count: number): Promise<Set<string>> {
  let answered = new Map<string, number>();
  for (let i = 0; i < count && answered.size < 2; i++) answered = scrapesAnswered(await getFresh(`${origin}/metrics`));
  return new Set(answered.keys());
}

/** The `worker` labels of one metric's series in an exposition. */
const workersOf = (exposition: string, metric: string) => [...exposition.matchAll(new RegExp(`^${metric}\\{worker="(\\d+)"\\}`, 'gm'))].map((match) => match[1]).sort();

/** The server as operators start it with WORKERS=2; resolves once both server processes serve. */
async function startTwo(): Promise<{ server: ServerProcess; origin: string; pids: number[] }> {
  const server = spawnServer({ dataDir, env: { WORKERS: '2' } });
  const ready = await server.line('server processes started');
  // Each process's own lines may reach the pipe after the supervisor's.
  await Promise.all([0, 1].map((worker) => server.line((line) => line.msg === 'platform listening' && line.worker === worker)));
  started.push(server.child.pid!, ...descendants(server.child.pid!));
  return { server, origin: `http://127.0.0.1:${ready.port as number}`, pids: ready.pids as number[] };
}

const from = (log: readonly LogLine[], msg: string) => log.filter((line) => line.msg === msg);

t.test('two server processes on one port, one database, migrated once; restarted when killed; stopped by one SIGTERM', async (t) => {
  const { server, origin, pids } = await startTwo();
  const postgres = await postmasterPid(dataDir);

  t.equal(from(server.log, 'embedded PostgreSQL started').length, 1, 'one database started');
  const migrated = from(server.log, 'database migrated');
  t.equal(migrated.length, 1, 'migrated once');
  t.equal(migrated[0]!.worker, undefined, 'by the supervisor, not by a server process');
  t.ok(migrated[0]!.applied as number > 0, 'a fresh database had every migration to apply');
  const listening = from(server.log, 'platform listening');
  t.same(listening.map((line) => line.worker).sort(), [0, 1], 'two server processes listen');
  t.same(new Set(listening.map((line) => line.port)), new Set([Number(new URL(origin).port)]), 'on the one port');
  t.same(new Set(listening.map((line) => line.pid)), new Set(pids), 'each its own process');
  t.same([...(await answeringWorkers(origin, 200))].sort(), ['0', '1'], 'both answer requests on the port');
  t.ok(await server.line((line) => line.msg === 'request' && line.worker === 1), 'log lines name the process that wrote them');

  // 2. Every scrape, whichever process takes it, has both processes' figures, each its own.
  const before = [...scrapesAnswered(await getFresh(`${origin}/metrics`)).values()].reduce((a, b) => a + b, 0);
  for (let i = 1; i <= 20; i++) {
    const exposition = await getFresh(`${origin}/metrics`);
    t.same(workersOf(exposition, 'process_start_time_seconds'), ['0', '1'], `scrape ${i}: both processes' series, apart`);
    t.match(exposition, /^metrics_processes_missing 0$/m, `scrape ${i}: none missing`);
    // Each scrape is counted by the process that answered it, after answering: the earlier ones, wherever they landed.
    const counted = [...scrapesAnswered(exposition).values()].reduce((a, b) => a + b, 0);
    if (counted !== before + i) t.fail(`scrape ${i}: counts ${counted} scrapes, not ${before + i}`);
  }
  t.pass('every scrape counts every earlier scrape, whichever process answered it');
  const forwarded = await fetch(`${origin}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
  t.equal(forwarded.status, 403, 'a scrape forwarded by a proxy is still refused without METRICS_TOKEN');

  // 3. A server process dies: the supervisor starts it again; the other serves meanwhile.
  const [first, second] = pids as [number, number];
  process.kill(second, 'SIGKILL');
  const exited = await server.line((line) => line.msg === 'a server process exited; starting it again' && line.pid === second);
  t.match(exited, { worker: 1, signal: 'SIGKILL' }, 'the supervisor saw it die');
  t.equal(await getFresh(`${origin}/health`), '{"status":"ok"}', 'the port still answers');
  const alone = await getFresh(`${origin}/metrics`);
  t.same(workersOf(alone, 'process_start_time_seconds'), ['0'], 'the metrics have the survivor\'s figures');
  t.match(alone, /^metrics_processes_missing 1$/m, 'and say one process is missing');
  const again = await server.line((line) => line.msg === 'server process ready' && line.worker === 1 && line.pid !== second);
  started.push(again.pid as number);
  t.ok(isRunning(again.pid as number), 'a new server process took its place');
  t.same([...(await answeringWorkers(origin, 200))].sort(), ['0', '1'], 'and both answer again');
  t.equal(from(server.log, 'database migrated').length, 1, 'the new one did not migrate');

  // 4. One SIGTERM to the supervisor stops all of it, the database last.
  const tree = descendants(server.child.pid!);
  t.ok(tree.includes(postgres) && tree.includes(first), 'the database and the server processes are the supervisor\'s');
  process.kill(server.child.pid!, 'SIGTERM');
  t.same(await server.exited, { code: 0, signal: null }, 'the supervisor exits 0 once everything has stopped');
  t.equal(from(server.log, 'platform stopped').length, 2, 'each server process stopped in order');
  const stoppedAt = server.log.findIndex((line) => line.msg === 'embedded PostgreSQL stopped');
  t.ok(stoppedAt > server.log.findLastIndex((line) => line.msg === 'platform stopped'), 'the database stopped after the last server process');
  t.same(tree.filter(isRunning), [], 'no process is left running');
});

t.test('a supervisor killed hard: its server processes stop by themselves; the next start takes the database over', async (t) => {
  const { server, pids } = await startTwo();
  const postgres = await postmasterPid(dataDir);
  process.kill(server.child.pid!, 'SIGKILL');
  await until('the server processes to stop', () => (pids.some(isRunning) ? undefined : true), 30_000);
  t.equal(from(server.log, 'the supervisor is gone: stopping now, hurried').length, 2, 'each saw its supervisor gone');
  t.ok(isRunning(postgres), 'the database is left running (its own process group)');

  const next = await startTwo();
  t.ok(next.server.log.some((line) => line.msg === 'stopping a PostgreSQL server left running by an earlier process'), 'the next start stopped the database left behind');
  t.notOk(isRunning(postgres), 'which is gone');
  const tree = descendants(next.server.child.pid!);
  process.kill(next.server.child.pid!, 'SIGTERM');
  t.same(await next.server.exited, { code: 0, signal: null });
  t.same(tree.filter(isRunning), [], 'no process is left running');
});
