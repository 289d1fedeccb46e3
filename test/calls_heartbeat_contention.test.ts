import pg from 'pg';
import { sql, type DatabasePool, type DatabaseTransactionConnection } from 'slonik';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { closeOrphanedCall, endCall, insertCall, orphanedCalls, touchCalls, type CallEnding } from '../runtime/calls/repository.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { callIn, voiceSetup, type VoiceSetup } from './helpers/voice.js';

/**
 * The statements about live calls under contention, on the real PostgreSQL: what many calls
 * ending at once while heartbeats fire comes down to.
 * 1. Two heartbeats naming the same calls in different orders (a call moves from the live calls
 *    to those whose end is being saved), the first held up by an end being saved: both are
 *    written, neither is taken for a deadlock.
 * 2. A call's end being saved while another process's sweep takes the same call: the sweep ends
 *    it, the end finds it ended; neither is taken for a deadlock.
 * 3. A heartbeat held up by the database is not joined by the next ones: one heartbeat statement
 *    at a time, however many intervals pass while it waits.
 * 4. A statement that fails while the stop closes the database pool fails for its caller alone:
 *    the stop completes (it neither rejects nor ends the process) and the statement's connection
 *    is closed, as every other.
 */

const DEADLOCK = '40P01';
const pidRow = z.object({ pid: z.number() });

/** A pool of the test's own, for transactions side by side (each on a connection of its own). */
async function testPool(t: Test, databaseUrl: string): Promise<DatabasePool> {
  const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 4 });
  t.teardown(() => pool.end());
  return pool;
}

/** Runs `work` in a transaction not retried on a deadlock; `pid` resolves with its backend's process id first. */
function inTransaction<T>(pool: DatabasePool, work: (tx: DatabaseTransactionConnection) => Promise<T>): { pid: Promise<number>; done: Promise<T> } {
  let reportPid!: (pid: number) => void;
  const pid = new Promise<number>((resolve) => (reportPid = resolve));
  const done = pool.transaction(async (tx) => {
    reportPid(await tx.oneFirst(sql.type(pidRow)`SELECT pg_backend_pid() AS pid`));
    return work(tx);
  }, 0);
  return { pid, done };
}

/**
 * Resolves once backend `pid` waits on a lock `blocker` holds. PostgreSQL announces no lock wait,
 * so its lock table is looked at until it shows one.
 */
async function heldUp(databaseUrl: string, pid: Promise<number>, blocker: Promise<number> | number): Promise<void> {
  const [waiting, holding] = [await pid, await blocker];
  await withClient(databaseUrl, async (db) => {
    while (!(await db.query('SELECT $2::int = ANY(pg_blocking_pids($1)) AS held', [waiting, holding])).rows[0].held) await new Promise((resolve) => setImmediate(resolve));
  });
}

/** A connection of the test's own with a transaction open, and its backend's process id. */
async function openTransaction(t: Test, databaseUrl: string): Promise<{ db: pg.Client; pid: number }> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  await db.query('BEGIN');
  return { db, pid: (await db.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number };
}

/** Resolves with the process id of a backend waiting on a lock `blocker` holds, running a statement that contains `text`. */
async function waitingOn(databaseUrl: string, blocker: number, text = ''): Promise<number> {
  return withClient(databaseUrl, async (db) => {
    for (;;) {
      const { rows } = await db.query(`SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid)) AND strpos(query, $2) > 0`, [blocker, text]);
      if (rows.length > 0) return rows[0].pid as number;
      await new Promise((resolve) => setImmediate(resolve));
    }
  });
}

/** How a settled promise came out: a value, or the SQLSTATE (or message) of its failure. */
const outcome = <T>(promise: Promise<T>) =>
  promise.then(
    (value) => ({ value }),
    (error: { code?: string; cause?: { code?: string }; message: string }) => ({ error: error.code ?? error.cause?.code ?? error.message }),
  );

async function openCalls(s: VoiceSetup, pool: DatabasePool, n: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    ids.push(await insertCall(pool, { userId: s.userId, assistantId: s.assistantId, assistantName: 'Bot', type: 'inbound', mode: 'pipeline', status: 'ringing', assistantPhoneNumber: s.number, clientPhoneNumber: '+14155550199', variables: {}, carrierCallId: null, carrierName: null, holder: HOLDER, streamTokenHash: Buffer.alloc(32), streamExpiresAt: new Date(Date.now() + 60_000).toISOString(), startedAt: new Date().toISOString() }));
  }
  return ids;
}

/** The process these tests stand for, holding the calls they open. */
const HOLDER = '00000000-0000-4000-8000-000000000001';
const ENDING: CallEnding = { status: 'ended', transcript: '', duration: 0, answeredBy: null, answeredAt: null, endedAt: new Date().toISOString(), carrierCost: 0, totalCost: 0, recordingPath: null, evaluationPending: false };
const beats = (ids: number[]) => ids.map((id) => ({ id, heardAt: null, transcript: null }));

t.test('two heartbeats naming the same calls in different orders, the first held up by an end being saved: both are written', async (t) => {
  const s = await voiceSetup(t);
  const pool = await testPool(t, s.api.databaseUrl);
  const [a, b, c] = await openCalls(s, pool, 3);
  // Every call has its heartbeat row, as after the first beat: the beats below update rows.
  await touchCalls(pool, HOLDER, beats([a!, b!, c!]));
  // b changed last, so a statement taking rows in the open calls' order (by last change, or by
  // place on disk: a changed row moves to the end) takes a, c, b, as the first beat lists them.
  const changed = (id: number, minutes: number) => withClient(s.api.databaseUrl, (db) => db.query(`UPDATE calls SET status = 'in-progress', updated_at = now() + make_interval(mins => $2) WHERE id = $1`, [id, minutes]));
  await changed(b!, 1);

  // c's end is being saved: its transaction holds c's heartbeat row until it commits.
  let commit!: () => void;
  const committing = new Promise<void>((resolve) => (commit = resolve));
  const end = inTransaction(pool, async (tx) => {
    const ended = await endCall(tx, c!, HOLDER, ENDING);
    await committing;
    return ended;
  });
  const first = inTransaction(pool, (tx) => touchCalls(tx, HOLDER, beats([a!, c!, b!])));
  await heldUp(s.api.databaseUrl, first.pid, end.pid);
  // The next beat falls due while the first still waits, and a has changed meanwhile: a comes after
  // b in whatever order an unsorted statement takes, the list's (a's end now being saved), the
  // open calls' or the disk's.
  await changed(a!, 2);
  const next = inTransaction(pool, (tx) => touchCalls(tx, HOLDER, beats([b!, a!])));
  await heldUp(s.api.databaseUrl, next.pid, first.pid);
  commit();

  t.same(await outcome(end.done), { value: true }, 'the end is saved');
  const [firstOutcome, nextOutcome] = await Promise.all([outcome(first.done), outcome(next.done)]);
  t.not('error' in firstOutcome && firstOutcome.error, DEADLOCK, 'the first beat is no deadlock victim');
  t.not('error' in nextOutcome && nextOutcome.error, DEADLOCK, 'nor is the next');
  t.ok('value' in firstOutcome && [a, b].every((id) => firstOutcome.value.includes(id!)), 'the first beat is written');
  t.same('value' in nextOutcome && [...nextOutcome.value].sort((x, y) => x - y), [a, b].sort((x, y) => x! - y!), 'the next beat vouches for both its calls');
});

t.test('a call\'s end being saved while another process\'s sweep takes it: one ends it, the other finds it ended', async (t) => {
  const s = await voiceSetup(t);
  const pool = await testPool(t, s.api.databaseUrl);
  const [d] = await openCalls(s, pool, 1);
  await touchCalls(pool, HOLDER, beats([d!]));
  const [orphan] = (await orphanedCalls(pool, 0, [])).filter((call) => call.id === d);

  // A reader of the call (a heartbeat's reference check takes this lock) keeps the sweep waiting
  // at the call's row, once it holds the heartbeat's.
  const reader = await openTransaction(t, s.api.databaseUrl);
  await reader.db.query('SELECT 1 FROM calls WHERE id = $1 FOR KEY SHARE', [d]);

  const sweep = inTransaction(pool, (tx) => closeOrphanedCall(tx, orphan!, { seconds: 0, carrier: 0, total: 0 }, null));
  await heldUp(s.api.databaseUrl, sweep.pid, reader.pid);
  const end = inTransaction(pool, (tx) => endCall(tx, d!, HOLDER, ENDING));
  await heldUp(s.api.databaseUrl, end.pid, sweep.pid);
  await reader.db.query('COMMIT');

  const [swept, ended] = await Promise.all([outcome(sweep.done), outcome(end.done)]);
  t.same([swept, ended], [{ value: true }, { value: false }], 'the sweep, first at the heartbeat row, ends the call; the end finds it ended');
  const { rows } = await withClient(s.api.databaseUrl, (db) => db.query('SELECT (SELECT count(*)::int FROM call_heartbeats WHERE call_id = $1) AS beats, (SELECT ended_at IS NOT NULL FROM calls WHERE id = $1) AS ended', [d]));
  t.same(rows, [{ beats: 0, ended: true }], 'ended, its heartbeat gone');
});

t.test('a heartbeat held up by the database is not joined by the next ones', async (t) => {
  const s = await voiceSetup(t);
  const heartbeatMs = s.api.config.callPresence.heartbeatMs;
  // Every write of a heartbeat row, as the database sees it.
  await withClient(s.api.databaseUrl, (db) =>
    db.query(`
      CREATE TABLE heartbeat_writes (call_id bigint NOT NULL);
      CREATE FUNCTION log_heartbeat_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO heartbeat_writes VALUES (NEW.call_id); RETURN NULL; END $$;
      CREATE TRIGGER heartbeat_writes AFTER INSERT OR UPDATE ON call_heartbeats FOR EACH ROW EXECUTE FUNCTION log_heartbeat_write();`),
  );
  const writes = (callId: number) => withClient(s.api.databaseUrl, async (db) => Number((await db.query('SELECT count(*) AS n FROM heartbeat_writes WHERE call_id = $1', [callId])).rows[0].n));
  const { callId, phone } = await callIn(s);
  await phone.silence(heartbeatMs + 200);
  await s.clock.settled();
  t.ok((await writes(callId)) > 0, 'the call has its heartbeat row');

  // A transaction holds the call's heartbeat row (as a sweep's or an end's does) for four intervals.
  const holder = await openTransaction(t, s.api.databaseUrl);
  await holder.db.query('SELECT 1 FROM call_heartbeats WHERE call_id = $1 FOR UPDATE', [callId]);
  const before = await writes(callId);
  await phone.silence(heartbeatMs);
  await waitingOn(s.api.databaseUrl, holder.pid, 'INSERT INTO call_heartbeats');
  await phone.silence(3 * heartbeatMs);
  await holder.db.query('COMMIT');
  await s.clock.settled();

  t.equal((await writes(callId)) - before, 1, 'one heartbeat waited and was written; the intervals that passed meanwhile added none');
  await phone.silence(heartbeatMs);
  await s.clock.settled();
  t.equal((await writes(callId)) - before, 2, 'the next comes on its interval once it is written');
});

t.test('a statement that fails while the stop closes the pool fails for its caller alone: the stop completes and closes its connection', async (t) => {
  const lines: Array<Record<string, any>> = [];
  const api = await startTestPlatform(t, {}, {}, (line) => lines.push(line));
  const user = await api.user();
  const pool = api.platform.runtime.pool;

  // A statement still running when the pool closes (nothing in the stop waits for it): it waits
  // on a row the test holds, and fails once it has the row (as a deadlock's victim fails).
  const holder = await openTransaction(t, api.databaseUrl);
  await holder.db.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [user.id]);
  const running = outcome(pool.query(sql.unsafe`UPDATE users SET name = name WHERE id = ${user.id} RETURNING 1 / (id - id)`));
  const waiter = await waitingOn(api.databaseUrl, holder.pid);

  const closing = outcome(api.platform.close({ graceMs: 0, hurry: Promise.resolve() }));
  while (pool.state().state === 'ACTIVE') await new Promise((resolve) => setImmediate(resolve));
  await holder.db.query('ROLLBACK');

  t.same(await closing, { value: undefined }, 'the stop completes');
  t.match(await running, { error: '22012' }, 'the statement failed, for its caller');
  t.ok(lines.some((l) => l.msg === 'platform stopped'), 'every step of the stop ran');
  // A backend leaves the activity view before its socket closes, and the stop closed the socket.
  t.same((await holder.db.query('SELECT pid FROM pg_stat_activity WHERE pid = $1', [waiter])).rows, [], 'its connection is closed');
});
