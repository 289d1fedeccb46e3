import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export const knowledgebaseRow = z.object({
  id: z.number(),
  name: z.string(),
  description: z.string().nullable(),
  status: z.enum(['empty', 'processing', 'active', 'failed']),
  documents_count: z.number(),
  assistants_count: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type KnowledgebaseRow = z.infer<typeof knowledgebaseRow>;

const knowledgebaseSelect = sql.fragment`
  SELECT k.id, k.name, k.description, k.status,
    (SELECT count(*) FROM documents d WHERE d.knowledgebase_id = k.id)::int AS documents_count,
    (SELECT count(*) FROM assistants a WHERE a.knowledgebase_id = k.id)::int AS assistants_count,
    k.created_at, k.updated_at
  FROM knowledgebases k`;

export async function insertKnowledgebase(db: CommonQueryMethods, userId: number, input: { name: string; description: string | null }): Promise<number> {
  return db.oneFirst(sql.type(z.object({ id: z.number() }))`
    INSERT INTO knowledgebases (user_id, name, description) VALUES (${userId}, ${input.name}, ${input.description}) RETURNING id`);
}

export async function findKnowledgebase(db: CommonQueryMethods, userId: number, id: number): Promise<KnowledgebaseRow | null> {
  return db.maybeOne(sql.type(knowledgebaseRow)`${knowledgebaseSelect} WHERE k.id = ${id} AND k.user_id = ${userId}`);
}

export async function listKnowledgebases(db: CommonQueryMethods, userId: number): Promise<readonly KnowledgebaseRow[]> {
  return db.any(sql.type(knowledgebaseRow)`${knowledgebaseSelect} WHERE k.user_id = ${userId} ORDER BY k.id`);
}

export async function updateKnowledgebase(
  db: CommonQueryMethods,
  userId: number,
  id: number,
  input: { name?: string; description?: string | null },
): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    UPDATE knowledgebases SET
      name = coalesce(${input.name ?? null}, name),
      description = CASE WHEN ${input.description !== undefined} THEN ${input.description ?? null} ELSE description END,
      updated_at = now()
    WHERE id = ${id} AND user_id = ${userId}`);
  return result.rowCount > 0;
}

/** Deletes the knowledgebase; its documents and jobs go with it (cascade). @returns upload paths to remove. */
export async function deleteKnowledgebase(db: CommonQueryMethods, userId: number, id: number): Promise<string[] | null> {
  const paths = await db.anyFirst(sql.type(z.object({ path: z.string().nullable() }))`
    SELECT source->>'path' AS path FROM documents WHERE knowledgebase_id = ${id} AND user_id = ${userId}`);
  const result = await db.query(sql.unsafe`DELETE FROM knowledgebases WHERE id = ${id} AND user_id = ${userId}`);
  if (result.rowCount === 0) return null;
  return paths.filter((path): path is string => path !== null);
}

/**
 * Recomputes a knowledgebase's status from its documents: any processing -> processing; else any
 * active -> active; else any failed -> failed; none -> empty. Run inside the transaction that
 * changed the documents.
 */
export async function refreshKnowledgebaseStatus(db: CommonQueryMethods, id: number): Promise<void> {
  // Lock first, compute in a later statement: under READ COMMITTED that statement's snapshot then
  // includes every transaction that changed a document of this knowledgebase before us, so two
  // documents settling at once cannot both compute from a stale view. NO KEY UPDATE does not
  // conflict with the key-share lock that inserting a document takes on its knowledgebase.
  await db.query(sql.unsafe`SELECT 1 FROM knowledgebases WHERE id = ${id} FOR NO KEY UPDATE`);
  await db.query(sql.unsafe`
    UPDATE knowledgebases k SET status = (
      SELECT CASE
        WHEN bool_or(d.status = 'processing') THEN 'processing'
        WHEN bool_or(d.status = 'active') THEN 'active'
        WHEN bool_or(d.status = 'failed') THEN 'failed'
        ELSE 'empty' END
      FROM documents d WHERE d.knowledgebase_id = k.id)
    WHERE k.id = ${id}`);
}

export const documentRow = z.object({
  id: z.number(),
  knowledgebase_id: z.number(),
  name: z.string(),
  description: z.string().nullable(),
  type: z.enum(['website', 'pdf', 'txt', 'docx']),
  status: z.enum(['processing', 'active', 'failed']),
  error: z.string().nullable(),
  source: z.record(z.unknown()),
  created_at: z.string(),
  updated_at: z.string(),
});
export type DocumentRow = z.infer<typeof documentRow>;

const documentColumns = sql.fragment`id, knowledgebase_id, name, description, type, status, error, source, created_at, updated_at`;

/** Inserts the document and its ingestion job. Run inside a transaction. */
export async function insertDocumentWithJob(
  db: CommonQueryMethods,
  input: { userId: number; knowledgebaseId: number; name: string; description: string | null; type: DocumentRow['type']; source: Record<string, unknown> },
): Promise<DocumentRow> {
  const row = await db.one(sql.type(documentRow)`
    INSERT INTO documents (knowledgebase_id, user_id, name, description, type, source)
    VALUES (${input.knowledgebaseId}, ${input.userId}, ${input.name}, ${input.description}, ${input.type}, ${sql.jsonb(input.source as never)})
    RETURNING ${documentColumns}`);
  await db.query(sql.unsafe`INSERT INTO document_jobs (document_id) VALUES (${row.id})`);
  return row;
}

export async function findDocument(db: CommonQueryMethods, userId: number, knowledgebaseId: number, id: number): Promise<DocumentRow | null> {
  return db.maybeOne(sql.type(documentRow)`
    SELECT ${documentColumns} FROM documents WHERE id = ${id} AND knowledgebase_id = ${knowledgebaseId} AND user_id = ${userId}`);
}

export async function listDocuments(db: CommonQueryMethods, userId: number, knowledgebaseId: number): Promise<readonly DocumentRow[]> {
  return db.any(sql.type(documentRow)`
    SELECT ${documentColumns} FROM documents WHERE knowledgebase_id = ${knowledgebaseId} AND user_id = ${userId} ORDER BY id`);
}

export async function updateDocument(
  db: CommonQueryMethods,
  userId: number,
  id: number,
  input: { name?: string; description?: string | null },
): Promise<DocumentRow | null> {
  return db.maybeOne(sql.type(documentRow)`
    UPDATE documents SET
      name = coalesce(${input.name ?? null}, name),
      description = CASE WHEN ${input.description !== undefined} THEN ${input.description ?? null} ELSE description END,
      updated_at = now()
    WHERE id = ${id} AND user_id = ${userId}
    RETURNING ${documentColumns}`);
}

export async function deleteDocument(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  const result = await db.query(sql.unsafe`DELETE FROM documents WHERE id = ${id} AND user_id = ${userId}`);
  return result.rowCount > 0;
}

/** ISO 639-1 of the first assistant using the knowledgebase, which decides text analysis. */
export async function knowledgebaseLanguage(db: CommonQueryMethods, knowledgebaseId: number): Promise<string | null> {
  return db.maybeOneFirst(sql.type(z.object({ iso_2: z.string() }))`
    SELECT l.iso_2 FROM assistants a JOIN languages l ON l.id = a.language_id
    WHERE a.knowledgebase_id = ${knowledgebaseId} ORDER BY a.id LIMIT 1`);
}

export async function documentNames(db: CommonQueryMethods, userId: number, ids: readonly number[]): Promise<Map<number, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db.any(sql.type(z.object({ id: z.number(), name: z.string() }))`
    SELECT id, name FROM documents WHERE user_id = ${userId} AND id = ANY(${sql.array([...ids], 'int8')})`);
  return new Map(rows.map((row) => [row.id, row.name]));
}
