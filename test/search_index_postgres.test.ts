/**
 * The PostgreSQL search index passes the shared contract (test/helpers/searchContract.ts):
 * ranking, tenant filters, replace, delete by document and knowledgebase, vector-space isolation.
 */
import t from 'tap';
import { createDatabasePool } from '../runtime/store/pool.js';
import { createPostgresSearchIndex, textSearchConfig } from '../runtime/search/postgres.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { searchIndexContract } from './helpers/searchContract.js';

const url = await freshDatabase();
const pool = await createDatabasePool(url, { maximumPoolSize: 2 });
t.teardown(() => pool.end());

async function seed() {
  return withClient(url, async (db) => {
    const user = async (email: string) => Number((await db.query(`INSERT INTO users (name, email, password_hash) VALUES ('u', $1, 'x') RETURNING id`, [email])).rows[0].id as string);
    const kb = async (userId: number) => Number((await db.query(`INSERT INTO knowledgebases (user_id, name) VALUES ($1, 'kb') RETURNING id`, [userId])).rows[0].id as string);
    const doc = async (userId: number, kbId: number) =>
      Number((await db.query(`INSERT INTO documents (knowledgebase_id, user_id, name, type, source) VALUES ($1, $2, 'd', 'txt', '{}') RETURNING id`, [kbId, userId])).rows[0].id as string);
    const a = await user('a@example.com');
    const b = await user('b@example.com');
    const [kb1, kb2, kbB] = [await kb(a), await kb(a), await kb(b)];
    return { a: { userId: a, kb1, kb2, docs: [await doc(a, kb1), await doc(a, kb1), await doc(a, kb2)] as const }, b: { userId: b, kb: kbB, doc: await doc(b, kbB) } };
  });
}

searchIndexContract(t, async () => ({ index: createPostgresSearchIndex(pool), ...(await seed()) }));

t.test('language-aware configuration', async (t) => {
  t.equal(textSearchConfig('en'), 'english');
  t.equal(textSearchConfig('de'), 'german');
  t.equal(textSearchConfig('ja'), 'simple');
  t.equal(textSearchConfig(undefined), 'simple');
});
