import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { ManualClock } from '../../runtime/clock.js';
import { createCrawler } from '../../runtime/knowledge/crawler.js';
import { createLocalEmbedder } from '../../runtime/knowledge/embedder.js';
import { createIngestion } from '../../runtime/knowledge/ingestion.js';
import { createLogger } from '../../runtime/logger.js';
import { createOutboundFetch } from '../../runtime/net/outbound.js';
import type { SearchIndex } from '../../runtime/search/types.js';
import { createDatabasePool, type DatabasePool } from '../../runtime/store/pool.js';
import { createWorkerPool, type WorkerPool } from '../../runtime/workers.js';
import { freshDatabase, withClient } from './database.js';

export interface IngestionSetup {
  readonly databaseUrl: string;
  readonly dataDir: string;
  readonly pool: DatabasePool;
  readonly workers: WorkerPool;
}

/** A fresh database, pool, one-thread worker pool and data directory; gone when `t` ends. */
export async function ingestionSetup(t: Test, poolSize = 4): Promise<IngestionSetup> {
  const databaseUrl = await freshDatabase();
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-ingestion-'));
  const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: poolSize });
  const workers = createWorkerPool(1);
  t.teardown(async () => {
    await workers.close();
    await pool.end();
    await rm(dataDir, { recursive: true, force: true });
  });
  return { databaseUrl, dataDir, pool, workers };
}

/**
 * Where a document's file is: its bytes in the database (as uploads are kept), or a file under
 * `DATA_DIR/uploads/` named in its source (as earlier versions kept them; `text: null`: the file is gone).
 */
export type UploadedText = { readonly kept: 'database'; readonly text: string } | { readonly kept: 'dataDir'; readonly text: string | null };

/** A user's txt document in a knowledgebase, with its job (`job` sets its columns); its id. */
export async function documentWithJob(s: IngestionSetup, name: string, file: UploadedText, job = `(document_id) VALUES ($1)`): Promise<number> {
  let source: Record<string, unknown> = { filename: `${name}.txt` };
  if (file.kept === 'dataDir') {
    const path = join('uploads', `${randomUUID()}.txt`);
    if (file.text !== null) {
      await mkdir(join(s.dataDir, 'uploads'), { recursive: true });
      await writeFile(join(s.dataDir, path), file.text);
    }
    source = { ...source, path };
  }
  return withClient(s.databaseUrl, async (db) => {
    const user = (await db.query(`INSERT INTO users (name, email, password_hash) VALUES ('A', $1, 'x') RETURNING id`, [`${randomUUID()}@example.com`])).rows[0].id;
    const kb = (await db.query(`INSERT INTO knowledgebases (user_id, name, status) VALUES ($1, 'FAQ', 'processing') RETURNING id`, [user])).rows[0].id;
    const doc = (await db.query(`INSERT INTO documents (knowledgebase_id, user_id, name, type, source) VALUES ($1, $2, $3, 'txt', $4) RETURNING id`, [kb, user, name, JSON.stringify(source)])).rows[0].id;
    await db.query(`INSERT INTO document_jobs ${job}`, [doc]);
    if (file.kept === 'database') await db.query(`INSERT INTO document_uploads (document_id, bytes) VALUES ($1, $2)`, [doc, Buffer.from(file.text)]);
    return Number(doc);
  });
}

/**
 * The ingestion worker over the real worker pool and local embedder, with `index` as the search
 * index; its clock stands still, so jobs run only as `start` and `wake` look for them.
 */
export function ingestionOf(s: IngestionSetup, index: SearchIndex, options: { backoffMs?: number; maxAttempts?: number } = {}) {
  return createIngestion({
    pool: s.pool,
    workers: s.workers,
    embedder: createLocalEmbedder(s.workers),
    index,
    crawler: createCrawler({ fetch: createOutboundFetch({ allowPrivate: false, allowHosts: new Set() }), workers: s.workers }),
    dataDir: s.dataDir,
    logger: createLogger('silent'),
    clock: new ManualClock(),
    concurrency: 1,
    leaseMs: 60_000,
    ...options,
  });
}
