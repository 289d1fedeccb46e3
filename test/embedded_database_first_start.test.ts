/**
 * The first start on a new DATA_DIR, which initialises the embedded cluster:
 * 1. killed outright in the middle of initdb (server and initdb alike, as a power cut would), it
 *    leaves no half-made cluster: the next start initialises again and serves.
 * 2. as root, a DATA_DIR inside a directory the OS user `postgres` cannot enter (mode 0700) is
 *    refused in one line naming that directory and what to change; exit 1, no stack trace,
 *    nothing initialised.
 */
import { chmod, mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { killLeftovers, spawnServer, until } from './helpers/server_process.js';

const root = await mkdtemp(join(tmpdir(), 'ap-first-start-'));
const started: number[] = [];
t.teardown(async () => {
  killLeftovers(started);
  await rm(root, { recursive: true, force: true });
});

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

t.test('a first start killed during initdb leaves nothing half made', async (t) => {
  await chmod(root, 0o711);
  const dataDir = join(root, 'interrupted');
  const first = spawnServer({ dataDir, detached: true });
  started.push(first.child.pid!);
  // initdb writes PG_VERSION first and the rest after it: the cluster is half made from here on.
  await until('initdb to have begun', async () => ((await exists(join(dataDir, 'postgres.initdb', 'PG_VERSION'))) ? true : undefined));
  process.kill(-first.child.pid!, 'SIGKILL');
  await first.exited;
  t.notOk(await exists(join(dataDir, 'postgres', 'PG_VERSION')), 'no cluster is in place');

  const second = spawnServer({ dataDir });
  started.push(second.child.pid!);
  t.equal((await fetch(`${await second.listening()}/health`)).status, 200, 'the next start initialises again and serves');
  t.ok(second.log.some((line) => line.msg === 'initialised embedded PostgreSQL cluster'));
  t.same((await readdir(dataDir)).filter((name) => name.startsWith('postgres')).sort(), ['postgres', 'postgres.password']);
  second.child.kill('SIGTERM');
  t.equal((await second.exited).code, 0);
});

t.test('as root, a DATA_DIR the postgres user cannot reach is one clear line', { skip: userInfo().uid !== 0 && 'only root runs PostgreSQL as another user' }, async (t) => {
  const closed = join(root, 'closed');
  await mkdir(closed, { mode: 0o700 });
  await chmod(closed, 0o700);
  const dataDir = join(closed, 'data');
  const server = spawnServer({ dataDir });
  started.push(server.child.pid!);
  const { code } = await server.exited;
  t.equal(code, 1);
  t.equal(
    server.stderr(),
    `PostgreSQL runs as the OS user postgres (this server runs as root) and cannot pass through ${closed} (mode 700) to reach ${join(dataDir, 'postgres')}: ` +
      'set DATA_DIR to a directory that user can reach, such as /var/lib/assistant-platform, or run the server as an unprivileged user\n',
    'one line naming the directory in the way and what to change',
  );
  t.same(server.log, [], 'no log lines, no stack trace');
  t.equal((await stat(closed)).mode & 0o777, 0o700, 'the directory in the way is left as it was');
  t.notOk(await exists(join(dataDir, 'postgres')), 'nothing initialised');
});
