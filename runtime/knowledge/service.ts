import type { DatabasePool } from 'slonik';
import { PlatformError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { SearchIndex } from '../search/types.js';
import type { WorkerPool } from '../workers.js';
import type { Embedder } from './embedder.js';
import {
  deleteDocument,
  deleteKnowledgebase,
  documentNames,
  findDocument,
  findKnowledgebase,
  knowledgebaseLanguage,
  insertDocumentWithJob,
  insertKnowledgebase,
  listDocuments,
  listKnowledgebases,
  refreshKnowledgebaseStatus,
  updateDocument,
  updateKnowledgebase,
  type DocumentRow,
  type KnowledgebaseRow,
} from './repository.js';
import { removeLegacyUpload, storeUpload } from './uploads.js';

const STATUS_LABELS = { empty: 'Empty', processing: 'Processing', active: 'Active', failed: 'Failed' } as const;
const TYPE_LABELS = { website: 'Website', pdf: 'PDF', txt: 'TXT', docx: 'DOCX' } as const;

export interface KnowledgebaseView {
  id: number;
  name: string;
  description: string | null;
  status: KnowledgebaseRow['status'];
  status_label: string;
  documents_count: number;
  assistants_count: number;
  created_at: string;
  updated_at: string;
}

export interface DocumentView {
  id: number;
  name: string;
  description: string | null;
  type: DocumentRow['type'];
  type_label: string;
  status: DocumentRow['status'];
  status_label: string;
  /** Why processing failed, in words a user can act on; null otherwise. */
  error: string | null;
  created_at: string;
  updated_at: string;
}

export function knowledgebaseView(row: KnowledgebaseRow): KnowledgebaseView {
  return { ...row, status_label: STATUS_LABELS[row.status] };
}

export function documentView(row: DocumentRow): DocumentView {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    type: row.type,
    type_label: TYPE_LABELS[row.type],
    status: row.status,
    status_label: STATUS_LABELS[row.status],
    error: row.error,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export type NewDocument =
  | { name: string; description: string | null; type: 'website'; url?: string; links?: Array<{ link: string }>; relativeLinksLimit: number }
  | { name: string; description: string | null; type: 'pdf' | 'txt' | 'docx'; file: { filename: string; contentType: string; data: Uint8Array } };

export interface KnowledgeServiceDeps {
  readonly pool: DatabasePool;
  readonly workers: WorkerPool;
  readonly index: SearchIndex;
  readonly embedder: Embedder;
  /** Where files uploaded by earlier versions are (removed with their documents). */
  readonly dataDir: string;
  readonly logger: Logger;
  /** Called after a document job is enqueued, so ingestion starts without waiting for a poll. */
  readonly onEnqueued?: () => void;
}

export interface Passage {
  document_id: number;
  document_name: string;
  content: string;
  score: number;
  /** `page N` or the page URL the passage comes from; null for plain files. */
  source: string | null;
}

export function createKnowledgeService({ pool, workers, index, embedder, dataDir, logger, onEnqueued }: KnowledgeServiceDeps) {
  /**
   * After a deletion has committed: the external index and the stored files are cleaned up each on
   * its own, and a failure is logged rather than reported (the deletion itself is done, and a
   * retry would only find it gone).
   */
  async function cleanUp(context: Record<string, number>, steps: Array<Promise<unknown>>): Promise<void> {
    for (const result of await Promise.allSettled(steps)) {
      if (result.status === 'rejected') logger.error({ err: result.reason, ...context }, 'clean-up after a deletion failed');
    }
  }

  async function ownedKnowledgebase(userId: number, id: number): Promise<KnowledgebaseRow> {
    const row = await findKnowledgebase(pool, userId, id);
    if (!row) throw new PlatformError('knowledgebase_not_found');
    return row;
  }

  return {
    async createKnowledgebase(userId: number, input: { name: string; description?: string | null }): Promise<KnowledgebaseView> {
      const id = await insertKnowledgebase(pool, userId, { name: input.name, description: input.description ?? null });
      return knowledgebaseView(await ownedKnowledgebase(userId, id));
    },

    async listKnowledgebases(userId: number): Promise<KnowledgebaseView[]> {
      return (await listKnowledgebases(pool, userId)).map(knowledgebaseView);
    },

    async getKnowledgebase(userId: number, id: number): Promise<KnowledgebaseView> {
      return knowledgebaseView(await ownedKnowledgebase(userId, id));
    },

    /** `input` is read after the knowledgebase is found, so a missing one is 404 before any 422. */
    async updateKnowledgebase(userId: number, id: number, input: () => { name?: string; description?: string | null }): Promise<KnowledgebaseView> {
      await ownedKnowledgebase(userId, id);
      if (!(await updateKnowledgebase(pool, userId, id, input()))) throw new PlatformError('knowledgebase_not_found');
      return knowledgebaseView(await ownedKnowledgebase(userId, id));
    },

    /** Removes the knowledgebase, its documents, jobs and stored files; assistants using it keep working without it. */
    async deleteKnowledgebase(userId: number, id: number): Promise<void> {
      const paths = await pool.transaction((tx) => deleteKnowledgebase(tx, userId, id));
      if (!paths) throw new PlatformError('knowledgebase_not_found');
      await cleanUp({ userId, knowledgebaseId: id }, [index.deleteKnowledgebase(userId, id), ...paths.map((path) => removeLegacyUpload(dataDir, path))]);
      logger.info({ userId, knowledgebaseId: id, documents: paths.length }, 'knowledgebase deleted');
    },

    /**
     * Stores what to ingest (the file's bytes, or the URLs) and enqueues a job in one transaction
     * with the document row; ingestion happens in the background, in whichever process claims the job.
     * `read` validates the request after the knowledgebase is found (404 before 422).
     * @throws ValidationError on `file` when the content is not of the declared type.
     */
    async createDocument(userId: number, knowledgebaseId: number, read: () => NewDocument): Promise<DocumentView> {
      await ownedKnowledgebase(userId, knowledgebaseId);
      const input = read();
      let source: Record<string, unknown>;
      let file: Uint8Array | undefined;
      if (input.type === 'website') {
        source = input.links ? { links: input.links.map((l) => l.link) } : { url: input.url, relative_links_limit: input.relativeLinksLimit };
      } else {
        const inspected = await workers.inspectUpload({ type: input.type, bytes: input.file.data });
        if (inspected.problem) throw ValidationError.field('file', inspected.problem);
        file = inspected.bytes;
        source = { filename: input.file.filename, content_type: input.file.contentType, size: file.byteLength };
      }
      const row = await pool.transaction(async (tx) => {
        const created = await insertDocumentWithJob(tx, { userId, knowledgebaseId, name: input.name, description: input.description, type: input.type, source });
        if (file) await storeUpload(tx, created.id, file);
        await refreshKnowledgebaseStatus(tx, knowledgebaseId);
        return created;
      });
      logger.info({ userId, knowledgebaseId, documentId: row.id, type: row.type }, 'document queued for ingestion');
      onEnqueued?.();
      return documentView(row);
    },

    async listDocuments(userId: number, knowledgebaseId: number): Promise<DocumentView[]> {
      await ownedKnowledgebase(userId, knowledgebaseId);
      return (await listDocuments(pool, userId, knowledgebaseId)).map(documentView);
    },

    async getDocument(userId: number, knowledgebaseId: number, id: number): Promise<DocumentView> {
      await ownedKnowledgebase(userId, knowledgebaseId);
      const row = await findDocument(pool, userId, knowledgebaseId, id);
      if (!row) throw new PlatformError('document_not_found');
      return documentView(row);
    },

    /** `input` is read after the knowledgebase and document are found (404 before 422). */
    async updateDocument(userId: number, knowledgebaseId: number, id: number, input: () => { name?: string; description?: string | null }): Promise<DocumentView> {
      await ownedKnowledgebase(userId, knowledgebaseId);
      if (!(await findDocument(pool, userId, knowledgebaseId, id))) throw new PlatformError('document_not_found');
      const row = await updateDocument(pool, userId, id, input());
      if (!row) throw new PlatformError('document_not_found');
      return documentView(row);
    },

    /** Permanent: the record, its job, its file; the knowledgebase status is recomputed. */
    async deleteDocument(userId: number, knowledgebaseId: number, id: number): Promise<void> {
      await ownedKnowledgebase(userId, knowledgebaseId);
      const row = await findDocument(pool, userId, knowledgebaseId, id);
      if (!row) throw new PlatformError('document_not_found');
      await pool.transaction(async (tx) => {
        await deleteDocument(tx, userId, id);
        await refreshKnowledgebaseStatus(tx, knowledgebaseId);
      });
      const path = row.source.path;
      await cleanUp({ userId, knowledgebaseId, documentId: id }, [index.deleteDocument(userId, id), ...(typeof path === 'string' ? [removeLegacyUpload(dataDir, path)] : [])]);
      logger.info({ userId, knowledgebaseId, documentId: id }, 'document deleted');
    },

    /**
     * The passages of a knowledgebase that best answer `query`: full-text and vector rankings
     * fused. What assistants call mid-conversation, and the search operation.
     */
    async search(userId: number, knowledgebaseId: number, query: string, limit = 5): Promise<Passage[]> {
      await ownedKnowledgebase(userId, knowledgebaseId);
      const [language, [embedding]] = await Promise.all([knowledgebaseLanguage(pool, knowledgebaseId), embedder.embed([query])]);
      const hits = await index.search({
        userId,
        knowledgebaseId,
        text: query,
        embedding: embedding!,
        embeddingModel: embedder.model,
        language: language ?? undefined,
        limit,
      });
      const names = await documentNames(pool, userId, [...new Set(hits.map((hit) => hit.documentId))]);
      return hits
        .filter((hit) => names.has(hit.documentId))
        .map((hit) => ({ document_id: hit.documentId, document_name: names.get(hit.documentId)!, content: hit.content, score: hit.score, source: hit.source }));
    },
  };
}

export type KnowledgeService = ReturnType<typeof createKnowledgeService>;
