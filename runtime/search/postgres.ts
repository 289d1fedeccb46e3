import { sql, type DatabasePool } from 'slonik';
import { z } from 'zod';
import { LANGUAGE_ANALYZERS, RRF_K, RRF_WINDOW, type CallSearchRequest, type CallSearchResult, type IndexedChunk, type IndexedDocument, type SearchHit, type SearchIndex, type SearchRequest } from './types.js';

/**
 * Search on PostgreSQL: chunks with a language-aware tsvector (GIN index) and the embedding as
 * real[]. A query is ranked three ways within the knowledgebase: by `ts_rank_cd` over an OR of
 * its lexemes, over their AND (passages holding every term, such as an exact order number, rise),
 * and by cosine (dot product of normalised vectors); the rankings are fused by reciprocal rank.
 */

/** PostgreSQL ships these text-search configurations; others fall back to `simple`. */
const PG_CONFIGS = new Set(['english', 'german', 'french', 'spanish', 'italian', 'portuguese', 'dutch', 'finnish', 'danish', 'swedish', 'norwegian', 'russian', 'turkish', 'greek', 'romanian', 'arabic', 'hindi']);

export function textSearchConfig(language: string | undefined): string {
  const name = language ? LANGUAGE_ANALYZERS[language] : undefined;
  return name && PG_CONFIGS.has(name) ? name : 'simple';
}

/** Chunks per INSERT statement. */
const INSERT_BATCH = 100;

/** PostgreSQL array literals of vectors (six decimals keep cosine ranks intact). */
export type VectorFormatter = (vectors: readonly Float32Array[]) => Promise<string[]>;

/** Formats on the calling thread; the platform passes the worker pool's formatter instead. */
export const formatVectorsHere: VectorFormatter = async (vectors) =>
  vectors.map((vector) => `{${Array.from(vector, (value) => value.toFixed(6)).join(',')}}`);

const hitRow = z.object({ document_id: z.number(), content: z.string(), source: z.string().nullable(), score: z.number() });

export function createPostgresSearchIndex(pool: DatabasePool, formatVectors: VectorFormatter = formatVectorsHere): SearchIndex {
  return {
    name: 'postgres',
    async prepare() {
      // The table and its indexes are created by migrations.
    },

    async replaceDocument(document: IndexedDocument, chunks: readonly IndexedChunk[], within) {
      const config = textSearchConfig(document.language);
      const literals = chunks.length > 0 ? await formatVectors(chunks.map((chunk) => chunk.embedding)) : [];
      // Within the caller's transaction, a savepoint of it.
      await (within ?? pool).transaction(async (tx) => {
        await tx.query(sql.unsafe`DELETE FROM document_chunks WHERE document_id = ${document.documentId} AND user_id = ${document.userId}`);
        // In batches: each statement's parameters are built in one short turn of the event loop,
        // so a document of thousands of chunks never blocks it for long.
        for (let start = 0; start < chunks.length; start += INSERT_BATCH) {
          const batch = chunks.slice(start, start + INSERT_BATCH);
          await tx.query(sql.unsafe`
            INSERT INTO document_chunks (document_id, knowledgebase_id, user_id, chunk_index, content, source, ts_config, tsv, embedding, embedding_model)
            SELECT ${document.documentId}, ${document.knowledgebaseId}, ${document.userId}, c.chunk_index, c.content, c.source,
                   ${config}::regconfig, to_tsvector(${config}::regconfig, c.content), c.embedding::real[], ${document.embeddingModel}
            FROM ${sql.unnest(
              batch.map((chunk, i) => [chunk.index, chunk.content, chunk.source, literals[start + i]!]),
              ['int4', 'text', 'text', 'text'],
            )} AS c (chunk_index, content, source, embedding)`);
        }
      });
    },

    async deleteDocument(userId, documentId) {
      await pool.query(sql.unsafe`DELETE FROM document_chunks WHERE document_id = ${documentId} AND user_id = ${userId}`);
    },

    async deleteKnowledgebase(userId, knowledgebaseId) {
      await pool.query(sql.unsafe`DELETE FROM document_chunks WHERE knowledgebase_id = ${knowledgebaseId} AND user_id = ${userId}`);
    },

    async indexCall() {
      // `calls.transcript_search` is a generated column: PostgreSQL indexes the transcript as it is saved.
    },

    async searchCalls(request: CallSearchRequest): Promise<CallSearchResult> {
      const f = request.filters;
      const conditions = [sql.fragment`user_id = ${request.userId}`, sql.fragment`transcript_search @@ plainto_tsquery('simple', ${request.text})`];
      if (f.status) conditions.push(sql.fragment`status = ${f.status}`);
      if (f.type) conditions.push(sql.fragment`type = ${f.type}`);
      if (f.phoneNumber) conditions.push(sql.fragment`client_phone_number = ${f.phoneNumber}`);
      if (f.assistantId !== undefined) conditions.push(sql.fragment`assistant_id = ${f.assistantId}`);
      if (f.campaignId !== undefined) conditions.push(sql.fragment`campaign_id = ${f.campaignId}`);
      if (f.dateFrom) conditions.push(sql.fragment`created_at >= (${f.dateFrom}::date)::timestamp AT TIME ZONE 'UTC'`);
      if (f.dateTo) conditions.push(sql.fragment`created_at < ((${f.dateTo}::date + 1)::timestamp AT TIME ZONE 'UTC')`);
      const where = sql.join(conditions, sql.fragment` AND `);
      const page = request.after
        ? sql.fragment`AND (created_at, id) < (${request.after.createdAt}::timestamptz, ${request.after.id}) ORDER BY created_at DESC, id DESC LIMIT ${request.size}`
        : sql.fragment`ORDER BY created_at DESC, id DESC LIMIT ${request.size} OFFSET ${request.from}`;
      const [rows, total] = await Promise.all([
        pool.any(sql.type(z.object({ id: z.number(), created_at: z.string() }))`SELECT id, created_at FROM calls WHERE ${where} ${page}`),
        pool.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM calls WHERE ${where}`),
      ]);
      const last = rows.at(-1);
      return { ids: rows.map((row) => row.id), total, last: last ? { createdAt: last.created_at, id: last.id } : undefined };
    },

    async search(request: SearchRequest): Promise<SearchHit[]> {
      const config = textSearchConfig(request.language);
      const rows = await pool.any(sql.type(hitRow)`
        WITH query AS (
          SELECT to_tsquery(${config}::regconfig, coalesce(nullif(array_to_string(ARRAY(
            SELECT quote_literal(lexeme) FROM unnest(tsvector_to_array(to_tsvector(${config}::regconfig, ${request.text}))) AS lexeme
          ), ' | '), ''), '''''')) AS q
        ),
        text_ranked AS (
          SELECT c.id, row_number() OVER (ORDER BY ts_rank_cd(c.tsv, query.q) DESC, c.id) AS rank
          FROM document_chunks c, query
          WHERE c.knowledgebase_id = ${request.knowledgebaseId} AND c.user_id = ${request.userId} AND c.tsv @@ query.q
          ORDER BY rank LIMIT ${RRF_WINDOW}
        ),
        all_terms_ranked AS (
          SELECT c.id, row_number() OVER (ORDER BY ts_rank_cd(c.tsv, plainto_tsquery(${config}::regconfig, ${request.text})) DESC, c.id) AS rank
          FROM document_chunks c
          WHERE c.knowledgebase_id = ${request.knowledgebaseId} AND c.user_id = ${request.userId}
            AND c.tsv @@ plainto_tsquery(${config}::regconfig, ${request.text})
          ORDER BY rank LIMIT ${RRF_WINDOW}
        ),
        vector_scored AS (
          SELECT c.id, (SELECT sum(a * b) FROM unnest(c.embedding, ${sql.array(Array.from(request.embedding), 'float4')}::real[]) AS t (a, b)) AS similarity
          FROM document_chunks c
          WHERE c.knowledgebase_id = ${request.knowledgebaseId} AND c.user_id = ${request.userId} AND c.embedding_model = ${request.embeddingModel}
        ),
        vector_ranked AS (
          SELECT id, row_number() OVER (ORDER BY similarity DESC, id) AS rank FROM vector_scored
          WHERE similarity > 0 ORDER BY rank LIMIT ${RRF_WINDOW}
        ),
        fused AS (
          SELECT id, sum(1.0 / (${RRF_K} + rank)) AS score
          FROM (SELECT id, rank FROM text_ranked UNION ALL SELECT id, rank FROM all_terms_ranked UNION ALL SELECT id, rank FROM vector_ranked) AS ranks
          GROUP BY id
        )
        SELECT c.document_id, c.content, c.source, f.score::float8 AS score
        FROM fused f JOIN document_chunks c ON c.id = f.id
        ORDER BY f.score DESC, c.id
        LIMIT ${request.limit}`);
      return rows.map((row) => ({ documentId: row.document_id, content: row.content, source: row.source, score: row.score }));
    },
  };
}
