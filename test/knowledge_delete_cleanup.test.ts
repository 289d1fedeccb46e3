/**
 * Deleting a document or a knowledgebase commits in the database first (the bytes of a file not
 * yet ingested go with it); then the external index and the files earlier versions stored under
 * DATA_DIR are cleaned up each on its own. An index that fails (Elasticsearch down) neither fails
 * the deletion (a retry would only find it gone, 404) nor keeps an upload on disk.
 */
import { access, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLocalEmbedder } from '../runtime/knowledge/embedder.js';
import { createKnowledgeService } from '../runtime/knowledge/service.js';
import { createLogger } from '../runtime/logger.js';
import type { SearchIndex } from '../runtime/search/types.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { createWorkerPool } from '../runtime/workers.js';
import { freshDatabase, withClient } from './helpers/database.js';

t.test('an index failing after the commit: the deletion stands and the files are removed', async (t) => {
  const databaseUrl = await freshDatabase();
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-delete-cleanup-'));
  const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
  const workers = createWorkerPool(1);
  t.teardown(async () => {
    await workers.close();
    await pool.end();
    await rm(dataDir, { recursive: true, force: true });
  });
  await mkdir(join(dataDir, 'uploads', '1'), { recursive: true });
  const { userId, kb, documents } = await withClient(databaseUrl, async (db) => {
    const user = Number((await db.query(`INSERT INTO users (name, email, password_hash) VALUES ('A', 'a@example.com', 'x') RETURNING id`)).rows[0].id);
    const knowledgebase = Number((await db.query(`INSERT INTO knowledgebases (user_id, name, status) VALUES ($1, 'FAQ', 'active') RETURNING id`, [user])).rows[0].id);
    const ids: number[] = [];
    for (const name of ['a', 'b']) {
      await writeFile(join(dataDir, 'uploads', '1', `${name}.txt`), 'Refunds take five working days.');
      ids.push(Number((await db.query(
        `INSERT INTO documents (knowledgebase_id, user_id, name, type, source, status) VALUES ($1, $2, $3, 'txt', $4, 'active') RETURNING id`,
        [knowledgebase, user, name, JSON.stringify({ path: `uploads/1/${name}.txt` })],
      )).rows[0].id));
    }
    for (const name of ['c', 'd']) {
      const id = Number((await db.query(
        `INSERT INTO documents (knowledgebase_id, user_id, name, type, source) VALUES ($1, $2, $3, 'txt', '{}') RETURNING id`,
        [knowledgebase, user, name],
      )).rows[0].id);
      await db.query(`INSERT INTO document_uploads (document_id, bytes) VALUES ($1, $2)`, [id, Buffer.from('Shipping is free.')]);
      ids.push(id);
    }
    return { userId: user, kb: knowledgebase, documents: ids };
  });
  const failing = async () => {
    throw new Error('index unreachable');
  };
  const index = { name: 'elasticsearch', deleteDocument: failing, deleteKnowledgebase: failing } as Pick<SearchIndex, 'name' | 'deleteDocument' | 'deleteKnowledgebase'> as SearchIndex;
  const knowledge = createKnowledgeService({ pool, workers, index, embedder: createLocalEmbedder(workers), dataDir, logger: createLogger('silent') });
  const exists = (name: string) => access(join(dataDir, 'uploads', '1', `${name}.txt`)).then(() => true, () => false);
  const kept = (id: number) => withClient(databaseUrl, async (db) => (await db.query(`SELECT count(*)::int AS n FROM document_uploads WHERE document_id = $1`, [id])).rows[0].n);

  await knowledge.deleteDocument(userId, kb, documents[0]!);
  t.notOk(await exists('a'), "the document's file is removed");
  await knowledge.deleteDocument(userId, kb, documents[2]!);
  t.equal(await kept(documents[2]!), 0, 'the bytes of a file not yet ingested are removed');
  await t.rejects(knowledge.deleteDocument(userId, kb, documents[0]!), { code: 'document_not_found' }, 'and the document is gone');
  await knowledge.deleteKnowledgebase(userId, kb);
  t.notOk(await exists('b'), "the knowledgebase's files are removed");
  t.equal(await kept(documents[3]!), 0, 'and the bytes of its files not yet ingested');
  await t.rejects(knowledge.deleteKnowledgebase(userId, kb), { code: 'knowledgebase_not_found' });
});
