/**
 * Section 7's failure rows: when storage fails underneath an operation, the response is a 500 in
 * the operation's body family with the message the specification words for it, and no detail of
 * the failure. Storage is broken for real by renaming a table in this file's own database.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const user = await api.user();

async function withTableMissing(table: string, work: () => Promise<void>): Promise<void> {
  await withClient(api.databaseUrl, (db) => db.query(`ALTER TABLE ${table} RENAME TO ${table}_away`));
  try {
    await work();
  } finally {
    await withClient(api.databaseUrl, (db) => db.query(`ALTER TABLE ${table}_away RENAME TO ${table}`));
  }
}

t.test('create knowledgebase', async (t) => {
  await withTableMissing('knowledgebases', async () => {
    const res = await api.request('POST', '/user/knowledgebases', { token: user.token, body: { name: 'KB' } });
    t.same([res.status, res.body], [500, { error: 'Failed to create knowledgebase. Please try again.' }]);
  });
  t.equal((await api.request('POST', '/user/knowledgebases', { token: user.token, body: { name: 'KB' } })).status, 201, 'works again');
});

t.test('create and delete document', async (t) => {
  const kb = (await api.request('POST', '/user/knowledgebases', { token: user.token, body: { name: 'KB' } })).body.data.id;
  const doc = (await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: user.token, body: { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/' } })).body.data.id;
  await withTableMissing('document_jobs', async () => {
    const res = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: user.token, body: { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/' } });
    t.same([res.status, res.body], [500, { error: 'Failed to create document. Please try again.' }]);
  });
  const count = await withClient(api.databaseUrl, async (db) => (await db.query('SELECT count(*)::int AS n FROM documents WHERE knowledgebase_id = $1', [kb])).rows[0].n);
  t.equal(count, 1, 'the failed creation left no document behind');
  await withTableMissing('documents', async () => {
    const res = await api.request('DELETE', `/user/knowledgebases/${kb}/documents/${doc}`, { token: user.token });
    t.same([res.status, res.body], [500, { error: 'Failed to delete document. Please try again.' }]);
  });
});

t.test('delete assistant', async (t) => {
  const created = { body: { data: await api.assistant(user.token, { name: 'A' }) } };
  await withTableMissing('assistants', async () => {
    const res = await api.request('DELETE', `/user/assistant/${created.body.data.id}`, { token: user.token });
    t.same([res.status, res.body], [500, { message: 'Assistant deletion failed' }]);
  });
  t.equal((await api.request('GET', `/user/assistant/${created.body.data.id}`, { token: user.token })).status, 200, 'still there');
});
