/**
 * The pool runs hot statement texts as named prepared statements:
 * 1. a text is named on its third run, prepared once on the connection, and answers as before;
 * 2. names stop at the capacity and the use counts stay bounded, whatever SQL is built;
 * 3. a statement whose table another process altered under it is answered all the same, and
 *    prepared afresh under a new name;
 * 4. inside a transaction a stale statement fails the transaction with its own error and nothing
 *    of it is kept; transaction control (START TRANSACTION, COMMIT, ROLLBACK) is never prepared;
 * 5. a statement the server lost (DEALLOCATE) is run again outside a transaction, and inside one
 *    fails the transaction rather than let COMMIT pass as a silent rollback;
 * 6. an error of the query itself (a constraint) is the query's error, not a retry.
 */
import t from 'tap';
import { sql, UniqueIntegrityConstraintViolationError } from 'slonik';
import { z } from 'zod';
import { createDatabasePool, createStatementNames } from '../runtime/store/pool.js';
import { freshDatabase, withClient } from './helpers/database.js';

const url = await freshDatabase();
// One connection, so what the pool prepared is what this session shows in pg_prepared_statements.
const pool = await createDatabasePool(url, { maximumPoolSize: 1 });
t.teardown(() => pool.end());
await withClient(url, (db) => db.query(`CREATE TABLE prep (id int PRIMARY KEY, label text NOT NULL); INSERT INTO prep VALUES (1, 'one')`));

const prepared = () =>
  pool.any(sql.type(z.object({ name: z.string(), statement: z.string() }))`SELECT name, statement FROM pg_prepared_statements WHERE statement LIKE '%FROM prep%'`);
const readAll = () => pool.any(sql.unsafe`SELECT * FROM prep WHERE id = ${1}`);

t.test('a text run three times is prepared once on the connection', async (t) => {
  t.same(await readAll(), [{ id: 1, label: 'one' }]);
  t.same(await readAll(), [{ id: 1, label: 'one' }]);
  t.same(await prepared(), [], 'two runs: still unnamed');
  t.same(await readAll(), [{ id: 1, label: 'one' }]);
  t.same(await readAll(), [{ id: 1, label: 'one' }]);
  const statements = await prepared();
  t.equal(statements.length, 1, 'prepared once, run twice');
  t.match(statements[0]!.statement, /SELECT \* FROM prep WHERE id = \$1/);
});

t.test('names stop at the capacity; counts of unnamed texts stay bounded', async (t) => {
  const names = createStatementNames({ minUses: 2, capacity: 2 });
  t.equal(names.nameOf('SELECT a'), undefined);
  const a = names.nameOf('SELECT a');
  t.type(a, 'string');
  t.equal(names.nameOf('SELECT a'), a, 'a name stays with its text');
  names.nameOf('SELECT b');
  const b = names.nameOf('SELECT b');
  t.not(b, a);
  names.nameOf('SELECT c');
  t.equal(names.nameOf('SELECT c'), undefined, 'past the capacity a text runs unnamed');
  t.same(new Set(Array.from({ length: 1_000 }, (_, i) => names.nameOf(`SELECT ${i}`))), new Set([undefined]), 'a thousand texts built once, none named');
  names.retire('SELECT a');
  names.nameOf('SELECT c');
  const c = names.nameOf('SELECT c');
  t.type(c, 'string', 'a retired name frees its place');
  t.not(c, a);
  names.nameOf('SELECT a');
  t.equal(names.nameOf('SELECT a'), undefined, 'and the retired text waits for a place like any other');
  const fresh = createStatementNames({ minUses: 1, capacity: 10 });
  t.type(fresh.nameOf('SELECT 1'), 'string');
  t.type(fresh.nameOf('  with x AS (SELECT 1) SELECT * FROM x'), 'string');
  for (const text of ['START TRANSACTION', 'COMMIT', 'ROLLBACK', 'SAVEPOINT s', 'SET statement_timeout = 1', `SELECT '${'x'.repeat(20_000)}'`]) {
    t.equal(fresh.nameOf(text), undefined, `not prepared: ${text.slice(0, 24)}`);
  }
});

t.test('a table altered under a prepared statement is still read, and the statement prepared anew', async (t) => {
  const before = (await prepared()).map((s) => s.name);
  await withClient(url, (db) => db.query(`ALTER TABLE prep ADD COLUMN note text NOT NULL DEFAULT 'added'`));
  t.same(await readAll(), [{ id: 1, label: 'one', note: 'added' }], 'the first read after the change answers with the new column');
  t.same(await readAll(), [{ id: 1, label: 'one', note: 'added' }]);
  for (let i = 0; i < 3; i++) await readAll();
  const after = (await prepared()).map((s) => s.name);
  t.ok(after.some((name) => !before.includes(name)), 'prepared again under a new name');
  t.same(await readAll(), [{ id: 1, label: 'one', note: 'added' }]);
});

t.test('inside a transaction a stale statement fails the transaction, and nothing of it stays', async (t) => {
  const insert = (id: number) => sql.unsafe`INSERT INTO prep (id, label) VALUES (${id}, 'tx') RETURNING *`;
  for (let id = 10; id < 14; id++) await pool.query(insert(id));
  await withClient(url, (db) => db.query(`ALTER TABLE prep ADD COLUMN extra int`));
  await t.rejects(
    pool.transaction(async (tx) => {
      await tx.query(sql.unsafe`UPDATE prep SET label = 'changed' WHERE id = 1`);
      await tx.query(insert(20));
    }),
    { code: '0A000' },
    "the statement's own error, not an aborted transaction's",
  );
  t.same(await pool.anyFirst(sql.unsafe`SELECT label FROM prep WHERE id IN (1, 20) ORDER BY id`), ['one'], 'the update was rolled back and the row not inserted');
  t.same((await pool.query(insert(21))).rows, [{ id: 21, label: 'tx', note: 'added', extra: null }], 'outside a transaction the statement runs again');
  const control = await pool.anyFirst(sql.unsafe`SELECT statement FROM pg_prepared_statements WHERE statement ~* '^(START|COMMIT|ROLLBACK|SAVEPOINT)'`);
  t.same(control, [], 'transaction control is never prepared');
});

t.test('a statement the server lost: run again outside a transaction, the transaction failed inside one', async (t) => {
  const insert = (id: number) => sql.unsafe`INSERT INTO prep (id, label) VALUES (${id}, 'lost')`;
  for (let id = 30; id < 34; id++) await pool.transaction((tx) => tx.query(insert(id)));
  await pool.query(sql.unsafe`DEALLOCATE ALL`);
  await t.rejects(pool.transaction((tx) => tx.query(insert(40))), { code: '26000' }, 'the transaction fails with the lost statement');
  t.equal(await pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM prep WHERE id = 40`), 0, 'and nothing of it was committed');
  await pool.query(sql.unsafe`DEALLOCATE ALL`);
  for (let i = 0; i < 3; i++) await pool.query(insert(50 + i));
  await pool.query(sql.unsafe`DEALLOCATE ALL`);
  await pool.query(insert(60));
  t.same(await pool.anyFirst(sql.unsafe`SELECT id FROM prep WHERE id >= 50 ORDER BY id`), [50, 51, 52, 60], 'outside a transaction it is run again');
});

t.test("a query's own error is not retried", async (t) => {
  await pool.query(sql.unsafe`CREATE SEQUENCE attempts`);
  // Each run takes a number from the sequence before the key clashes: a retry would take two.
  const duplicate = () => pool.query(sql.unsafe`INSERT INTO prep (id, label) SELECT ${1} + nextval('attempts')::int * 0, 'again'`);
  for (let i = 0; i < 4; i++) t.ok((await duplicate().catch((error: unknown) => error)) instanceof UniqueIntegrityConstraintViolationError);
  t.equal(await pool.oneFirst(sql.unsafe`SELECT last_value::int FROM attempts`), 4, 'one attempt per query, prepared or not');
});
