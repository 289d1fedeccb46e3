/**
 * The key that signs recording links, kept in the database and shared by every process on it:
 * 1. processes starting together, each with a data directory of its own, make one 32-byte key and
 *    all read it; later starts read it too;
 * 2. the first start after an upgrade takes its data directory's key file, so the links given
 *    before stay valid; another directory's older key does not replace it (and is named in the log);
 * 3. an empty or short key file stops the start when it would be taken in; the database never
 *    holds a short key.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { recordingSecret } from '../runtime/calls/recording.js';
import { createLogger } from '../runtime/logger.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { freshDatabase, withClient } from './helpers/database.js';

async function dataDir(t: Test, key?: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ap-secret-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  if (key !== undefined) await writeFile(join(dir, 'recordings.secret'), key);
  return dir;
}

async function database(t: Test, connections = 2) {
  const databaseUrl = await freshDatabase();
  const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: connections });
  t.teardown(() => pool.end());
  return { databaseUrl, pool };
}

t.test('one 32-byte key per database, also when made concurrently by processes with their own data directories', async (t) => {
  const { pool } = await database(t, 8);
  const dirs = await Promise.all(Array.from({ length: 8 }, () => dataDir(t)));
  const keys = await Promise.all(dirs.map((dir) => recordingSecret(pool, dir)));
  t.equal(keys[0]!.length, 32);
  t.ok(keys.every((key) => key.equals(keys[0]!)), 'every starter reads the same key');
  t.ok((await recordingSecret(pool, await dataDir(t))).equals(keys[0]!), 'and so does the next start, with yet another data directory');
});

t.test("the first start after an upgrade takes its data directory's key; an older key elsewhere does not replace it", async (t) => {
  const { pool } = await database(t);
  const kept = randomBytes(32);
  const first = await recordingSecret(pool, await dataDir(t, `${kept.toString('hex')}\n`));
  t.ok(first.equals(kept), 'the key that signed the links already given');
  const warnings: Array<Record<string, unknown>> = [];
  const logger = createLogger('warn', { write: (line: string) => void warnings.push(JSON.parse(line) as Record<string, unknown>) });
  const other = await dataDir(t, randomBytes(32).toString('hex'));
  t.ok((await recordingSecret(pool, other, logger)).equals(kept), "a second machine's own older key is not used");
  t.match(warnings, [{ path: join(other, 'recordings.secret'), msg: /another recording link key/ }]);
  t.ok((await recordingSecret(pool, await dataDir(t, ''))).equals(kept), 'nor is a damaged file once the database holds the key');
});

t.test('an empty or short key stops the start instead of signing with it', async (t) => {
  const { databaseUrl, pool } = await database(t);
  await t.rejects(recordingSecret(pool, await dataDir(t, '')), /does not hold a 32-byte key/);
  await t.rejects(recordingSecret(pool, await dataDir(t, 'abcd')), /does not hold a 32-byte key/);
  const stored = await withClient(databaseUrl, async (db) => (await db.query(`SELECT count(*)::int AS n FROM platform_secrets`)).rows[0].n);
  t.equal(stored, 0, 'nothing was stored');
  await t.rejects(
    withClient(databaseUrl, (db) => db.query(`INSERT INTO platform_secrets (name, value) VALUES ('recordings', '\\x0102')`)),
    /check constraint/,
    'the database refuses a short key',
  );
});
