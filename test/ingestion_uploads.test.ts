/**
 * Where ingestion finds an uploaded file, and how long the database keeps it:
 * 1. through a failure that is retried the bytes stay (the retry reads them), and once the
 *    document is ingested they are dropped;
 * 2. a failure for good drops them too (nothing runs the job again);
 * 3. a document uploaded before files were kept in the database (its file under DATA_DIR/uploads,
 *    no bytes in the database) is ingested from that file; one whose file is gone fails with
 *    "The uploaded file is missing.".
 * The real worker pool, local embedder and database; the search index records what it is given.
 */
import t from 'tap';
import type { IndexedChunk, SearchIndex } from '../runtime/search/types.js';
import { withClient } from './helpers/database.js';
import { documentWithJob, ingestionOf, ingestionSetup, type IngestionSetup } from './helpers/ingestion.js';

/** An index that fails its first `failures` writes (an outage a retry gets past) and keeps the rest. */
function flakyIndex(failures: number) {
  const written: Array<readonly IndexedChunk[]> = [];
  let calls = 0;
  const index = {
    name: 'postgres',
    async replaceDocument(_document, chunks) {
      if (++calls <= failures) throw new Error('index unreachable');
      written.push(chunks);
    },
    async deleteDocument() {},
  } as Pick<SearchIndex, 'name' | 'replaceDocument' | 'deleteDocument'> as SearchIndex;
  return { index, written, calls: () => calls };
}

const documentState = (s: IngestionSetup, id: number) =>
  withClient(s.databaseUrl, async (db) => (await db.query(
    `SELECT d.status, d.error, (SELECT count(*)::int FROM document_uploads u WHERE u.document_id = d.id) AS uploads FROM documents d WHERE d.id = $1`,
    [id],
  )).rows[0]);

t.test('the bytes stay through a retried failure and are dropped once the document is ingested', async (t) => {
  const s = await ingestionSetup(t);
  const id = await documentWithJob(s, 'FAQ', { kept: 'database', text: 'Refunds take five working days.' });
  const flaky = flakyIndex(1);
  const ingestion = ingestionOf(s, flaky.index, { backoffMs: 0 });
  ingestion.start();
  await ingestion.idle();
  await ingestion.stop();
  t.equal(flaky.calls(), 2, 'run twice');
  t.match(flaky.written, [[{ content: /five working days/ }]], "the retry read the file's bytes");
  t.same(await documentState(s, id), { status: 'active', error: null, uploads: 0 }, 'ingested, and the bytes are gone');
});

t.test('a failure for good drops the bytes', async (t) => {
  const s = await ingestionSetup(t);
  const id = await documentWithJob(s, 'FAQ', { kept: 'database', text: 'Refunds take five working days.' });
  const ingestion = ingestionOf(s, flakyIndex(Infinity).index, { maxAttempts: 1 });
  ingestion.start();
  await ingestion.idle();
  await ingestion.stop();
  t.same(await documentState(s, id), { status: 'failed', error: 'The document could not be processed.', uploads: 0 });
});

t.test('a file stored under DATA_DIR by an earlier version is read from there when the database has none', async (t) => {
  const s = await ingestionSetup(t);
  const kept = await documentWithJob(s, 'Old', { kept: 'dataDir', text: 'Parking is free behind the building.' });
  const gone = await documentWithJob(s, 'Lost', { kept: 'dataDir', text: null });
  const flaky = flakyIndex(0);
  const ingestion = ingestionOf(s, flaky.index);
  ingestion.start();
  await ingestion.idle();
  await ingestion.stop();
  t.match(flaky.written, [[{ content: /Parking is free/ }]]);
  t.same(await documentState(s, kept), { status: 'active', error: null, uploads: 0 });
  t.same(await documentState(s, gone), { status: 'failed', error: 'The uploaded file is missing.', uploads: 0 });
});
