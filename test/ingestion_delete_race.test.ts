/**
 * A document deleted while its chunks are being written to the search index leaves nothing
 * behind there: the chunks are written under the job's row lock, so the delete (whose cascade
 * takes the job's row) waits for them, and the index clean-up that follows the delete (as the
 * knowledge service does it; Elasticsearch has no foreign key to cascade) finds them there.
 * The index here keeps chunks by document as an external index does; the rest is the real worker
 * pool, local embedder and database. A job whose every run ended with its process is failed, not
 * run again; a run whose lease ran out does not settle the job over its newer claim.
 */
import t from 'tap';
import type { IndexedChunk, SearchIndex } from '../runtime/search/types.js';
import { withClient } from './helpers/database.js';
import { documentWithJob, ingestionOf, ingestionSetup as setup } from './helpers/ingestion.js';

t.test('a document deleted during indexing waits for the chunks, and its clean-up removes them', async (t) => {
  const s = await setup(t);
  const { databaseUrl } = s;
  const documentId = await documentWithJob(s, 'FAQ', { kept: 'database', text: 'Refunds take five working days.\n\nShipping is free above fifty euros.' });

  const stored = new Map<number, readonly IndexedChunk[]>();
  let deleting: Promise<unknown> | undefined;
  let deleted = false;
  let waited = false;
  const index = {
    name: 'elasticsearch',
    async replaceDocument(document, chunks) {
      // The user's delete lands while the chunks are on their way: it waits on the job's row.
      deleting = withClient(databaseUrl, (db) => db.query('DELETE FROM documents WHERE id = $1', [document.documentId])).then(() => (deleted = true));
      while (!deleted && !waited) {
        waited = await withClient(databaseUrl, async (db) => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM documents%'`)).rowCount! > 0);
      }
      stored.set(document.documentId, chunks);
    },
    async deleteDocument(_userId, id) {
      stored.delete(id);
    },
  } as Pick<SearchIndex, 'name' | 'replaceDocument' | 'deleteDocument'> as SearchIndex;

  const ingestion = ingestionOf(s, index);
  ingestion.start();
  await ingestion.idle();
  t.ok(waited && stored.has(documentId), 'the delete waited until the chunks were written');
  await deleting;
  // The knowledge service's delete, once its transaction is done, clears the index.
  await index.deleteDocument(0, documentId);
  await ingestion.stop();
  t.notOk(stored.has(documentId), 'no chunk of the deleted document is left in the index');
});

t.test('a job claimed more often than its attempts without an outcome (its runs brought the process down) fails instead of running again', async (t) => {
  const s = await setup(t);
  const { databaseUrl } = s;
  // Claimed five times (its three attempts and two spare), each run's process gone before it recorded anything: the lease has expired.
  const documentId = await documentWithJob(s, 'Poison', { kept: 'database', text: 'Some text.' }, `(document_id, status, attempts, lease_expires_at) VALUES ($1, 'running', 5, now() - interval '1 second')`);
  let indexed = 0;
  let cleared = 0;
  const index = { name: 'postgres', async replaceDocument() { indexed++; }, async deleteDocument() { cleared++; } } as Pick<SearchIndex, 'name' | 'replaceDocument' | 'deleteDocument'> as SearchIndex;
  const ingestion = ingestionOf(s, index);
  ingestion.start();
  const status = () => withClient(databaseUrl, async (db) => (await db.query(`SELECT status, error FROM documents WHERE id = $1`, [documentId])).rows[0]);
  await ingestion.idle();
  await ingestion.stop();
  t.same(await status(), { status: 'failed', error: 'The document could not be processed.' });
  t.equal(indexed, 0, 'not run a sixth time');
  t.equal(cleared, 1, "and whatever an earlier run indexed is removed from the search index");
});

t.test("a run whose lease ran out does not record its outcome over the job's newer claim", async (t) => {
  const { claimJob, completeJob, failJob, retryJob } = await import('../runtime/knowledge/jobs.js');
  const s = await setup(t, 2);
  const { databaseUrl, pool } = s;
  const documentId = await documentWithJob(s, 'Slow', { kept: 'database', text: 'Slow.' });
  const state = () => withClient(databaseUrl, async (db) => (await db.query(`SELECT d.status AS document, j.status AS job FROM documents d JOIN document_jobs j ON j.document_id = d.id WHERE d.id = $1`, [documentId])).rows[0]);
  const stale = (await claimJob(pool, 60_000))!;
  await withClient(databaseUrl, (db) => db.query(`UPDATE document_jobs SET lease_expires_at = now() - interval '1 second'`));
  const current = (await claimJob(pool, 60_000))!;
  t.equal(current.attempts, 2, 'claimed again once the first lease ran out');

  await pool.transaction((tx) => failJob(tx, stale, 'a late failure'));
  await retryJob(pool, stale, 'a late retry', 0);
  t.same(await state(), { document: 'processing', job: 'running' }, "the first run's late failure and retry change nothing");
  t.equal(await pool.transaction((tx) => completeJob(tx, stale)), 'superseded', 'nor does its late success');
  t.same(await state(), { document: 'processing', job: 'running' });
  t.equal(await pool.transaction((tx) => completeJob(tx, current)), 'done');
  t.same(await state(), { document: 'active', job: 'done' }, 'the newer claim settles it');
});
