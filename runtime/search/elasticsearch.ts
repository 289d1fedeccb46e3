import { Client, errors } from '@elastic/elasticsearch';
import { LANGUAGE_ANALYZERS, RRF_K, RRF_WINDOW, type CallSearchRequest, type IndexedCall, type IndexedChunk, type IndexedDocument, type SearchHit, type SearchIndex, type SearchRequest } from './types.js';

/**
 * Search on Elasticsearch (8.x/9.x). Request bodies are built by the pure functions below, which
 * CI checks against fixtures written from the Elasticsearch reference; the adapter itself runs the
 * shared contract suite whenever ELASTICSEARCH_URL is set.
 *
 * One index per vector size (`<prefix>-chunks-<dims>`), created from an index template with
 * explicit mappings: keyword ids, `content` analysed with `standard` plus one sub-field per
 * language analyzer, and a cosine `dense_vector`. A query runs as an RRF retriever over an any-term
 * match, an all-terms match and a kNN search, each filtered to the user and knowledgebase;
 * clusters without the RRF retriever get the three rankings fused here instead.
 */

const ANALYZED_LANGUAGES = [...new Set(Object.values(LANGUAGE_ANALYZERS))].sort();

/** The transcripts index: one document per ended call, its filters as keywords. */
export function callsIndexTemplate(prefix: string) {
  return {
    name: `${prefix}-calls`,
    index_patterns: [`${prefix}-calls`],
    template: {
      settings: { number_of_shards: 1 },
      mappings: {
        dynamic: 'strict' as const,
        properties: {
          id: { type: 'long' as const },
          user_id: { type: 'keyword' as const },
          assistant_id: { type: 'keyword' as const },
          campaign_id: { type: 'keyword' as const },
          status: { type: 'keyword' as const },
          type: { type: 'keyword' as const },
          client_phone_number: { type: 'keyword' as const },
          created_at: { type: 'date' as const },
          transcript: { type: 'text' as const, analyzer: 'standard' },
        },
      },
    },
  };
}

export function callDocument(call: IndexedCall) {
  return {
    id: call.id,
    user_id: String(call.userId),
    assistant_id: call.assistantId === null ? null : String(call.assistantId),
    campaign_id: call.campaignId === null ? null : String(call.campaignId),
    status: call.status,
    type: call.type,
    client_phone_number: call.clientPhoneNumber,
    created_at: call.createdAt,
    transcript: call.transcript,
  };
}

/** Every word must match; the listing's filters are term/range filters; newest first with `search_after`. */
export function callSearchQuery(index: string, request: CallSearchRequest) {
  const f = request.filters;
  const filter: unknown[] = [{ term: { user_id: String(request.userId) } }];
  if (f.status) filter.push({ term: { status: f.status } });
  if (f.type) filter.push({ term: { type: f.type } });
  if (f.phoneNumber) filter.push({ term: { client_phone_number: f.phoneNumber } });
  if (f.assistantId !== undefined) filter.push({ term: { assistant_id: String(f.assistantId) } });
  if (f.campaignId !== undefined) filter.push({ term: { campaign_id: String(f.campaignId) } });
  if (f.dateFrom || f.dateTo) {
    filter.push({ range: { created_at: { ...(f.dateFrom ? { gte: `${f.dateFrom}T00:00:00Z` } : {}), ...(f.dateTo ? { lt: `${f.dateTo}T00:00:00Z||+1d` } : {}) } } });
  }
  return {
    index,
    query: { bool: { must: [{ match: { transcript: { query: request.text, operator: 'and' } } }], filter } },
    sort: [{ created_at: { order: 'desc' } }, { id: { order: 'desc' } }],
    size: request.size,
    track_total_hits: true,
    _source: false,
    ...(request.after ? { search_after: [Date.parse(request.after.createdAt), request.after.id] } : { from: request.from }),
  };
}

export function indexName(prefix: string, dimensions: number): string {
  return `${prefix}-chunks-${dimensions}`;
}

export function indexTemplate(prefix: string, dimensions: number) {
  return {
    name: `${prefix}-chunks-${dimensions}`,
    index_patterns: [indexName(prefix, dimensions)],
    template: {
      settings: { number_of_shards: 1 },
      mappings: {
        dynamic: 'strict' as const,
        properties: {
          user_id: { type: 'keyword' as const },
          knowledgebase_id: { type: 'keyword' as const },
          document_id: { type: 'keyword' as const },
          chunk_index: { type: 'integer' as const },
          source: { type: 'keyword' as const, index: false },
          language: { type: 'keyword' as const },
          embedding_model: { type: 'keyword' as const },
          content: {
            type: 'text' as const,
            analyzer: 'standard',
            fields: Object.fromEntries(ANALYZED_LANGUAGES.map((analyzer) => [analyzer, { type: 'text' as const, analyzer }])),
          },
          embedding: { type: 'dense_vector' as const, dims: dimensions, index: true, similarity: 'cosine' as const },
        },
      },
    },
  };
}

/** `_bulk` operations: an action line and a document per chunk; ids are `<document>:<chunk>`. */
export function bulkOperations(index: string, document: IndexedDocument, chunks: readonly IndexedChunk[]): unknown[] {
  return chunks.flatMap((chunk) => [
    { index: { _index: index, _id: `${document.documentId}:${chunk.index}` } },
    {
      user_id: String(document.userId),
      knowledgebase_id: String(document.knowledgebaseId),
      document_id: String(document.documentId),
      chunk_index: chunk.index,
      source: chunk.source,
      language: document.language ?? null,
      embedding_model: document.embeddingModel,
      content: chunk.content,
      embedding: Array.from(chunk.embedding),
    },
  ]);
}

export function deleteDocumentQuery(index: string, userId: number, documentId: number) {
  return {
    index,
    refresh: true,
    conflicts: 'proceed' as const,
    query: { bool: { filter: [{ term: { user_id: String(userId) } }, { term: { document_id: String(documentId) } }] } },
  };
}

export function deleteKnowledgebaseQuery(index: string, userId: number, knowledgebaseId: number) {
  return {
    index,
    refresh: true,
    conflicts: 'proceed' as const,
    query: { bool: { filter: [{ term: { user_id: String(userId) } }, { term: { knowledgebase_id: String(knowledgebaseId) } }] } },
  };
}

function filters(request: SearchRequest) {
  return [{ term: { user_id: String(request.userId) } }, { term: { knowledgebase_id: String(request.knowledgebaseId) } }];
}

/** A match over the content and its language sub-field; `and` requires every term. */
function textQuery(request: SearchRequest, operator: 'or' | 'and' = 'or') {
  const analyzer = request.language ? LANGUAGE_ANALYZERS[request.language] : undefined;
  return {
    bool: {
      must: { multi_match: { query: request.text, fields: analyzer ? ['content', `content.${analyzer}`] : ['content'], operator } },
      filter: filters(request),
    },
  };
}

function knnClause(request: SearchRequest) {
  return {
    field: 'embedding',
    query_vector: Array.from(request.embedding),
    k: RRF_WINDOW,
    num_candidates: RRF_WINDOW * 2,
    filter: [...filters(request), { term: { embedding_model: request.embeddingModel } }],
  };
}

const SOURCE_FIELDS = ['document_id', 'content', 'source'];

/** Hybrid search with the RRF retriever (Elasticsearch 8.14 and later). */
export function hybridSearch(index: string, request: SearchRequest) {
  return {
    index,
    size: request.limit,
    _source: SOURCE_FIELDS,
    retriever: {
      rrf: {
        retrievers: [{ standard: { query: textQuery(request) } }, { standard: { query: textQuery(request, 'and') } }, { knn: knnClause(request) }],
        rank_window_size: RRF_WINDOW,
        rank_constant: RRF_K,
      },
    },
  };
}

/** The fallback's three rankings, fused by `fuseRankings`. */
export function textOnlySearch(index: string, request: SearchRequest, operator: 'or' | 'and' = 'or') {
  return { index, size: RRF_WINDOW, _source: SOURCE_FIELDS, query: textQuery(request, operator) };
}

export function vectorOnlySearch(index: string, request: SearchRequest) {
  return { index, size: RRF_WINDOW, _source: SOURCE_FIELDS, knn: knnClause(request) };
}

interface HitSource {
  document_id: string;
  content: string;
  source: string | null;
}

type Hits = Array<{ _id?: string | null; _score?: number | null; _source?: HitSource }>;

function toHit(source: HitSource, score: number): SearchHit {
  return { documentId: Number(source.document_id), content: source.content, source: source.source, score };
}

/** Reciprocal rank fusion of ranked hit lists, identical to the server-side retriever. */
export function fuseRankings(rankings: Hits[], limit: number): SearchHit[] {
  const fused = new Map<string, { source: HitSource; score: number }>();
  for (const ranking of rankings) {
    ranking.forEach((hit, rank) => {
      if (!hit._id || !hit._source) return;
      const entry = fused.get(hit._id) ?? { source: hit._source, score: 0 };
      entry.score += 1 / (RRF_K + rank + 1);
      fused.set(hit._id, entry);
    });
  }
  return [...fused.values()].sort((a, b) => b.score - a.score).slice(0, limit).map((entry) => toHit(entry.source, entry.score));
}

export interface ElasticsearchOptions {
  readonly url: string;
  /** Index and template name prefix. @defaultValue 'assistant-platform' */
  readonly prefix?: string;
  /** Size of the embedder's vectors (decides the index). */
  readonly dimensions: () => Promise<number>;
}

export function createElasticsearchIndex(options: ElasticsearchOptions): SearchIndex {
  const client = new Client({ node: options.url, requestTimeout: 30_000 });
  const prefix = options.prefix ?? 'assistant-platform';
  let index: string | undefined;
  let rrfSupported = true;

  /** Puts the index template and creates its index if missing (another process may win the race). */
  async function ensureIndex(template: { name: string }, name: string): Promise<void> {
    await client.indices.putIndexTemplate(template as never);
    if (await client.indices.exists({ index: name })) return;
    await client.indices.create({ index: name }).catch((error: unknown) => {
      if (!(error instanceof errors.ResponseError && error.body?.error?.type === 'resource_already_exists_exception')) throw error;
    });
  }

  async function currentIndex(): Promise<string> {
    if (!index) {
      const dimensions = await options.dimensions();
      const name = indexName(prefix, dimensions);
      await ensureIndex(indexTemplate(prefix, dimensions), name);
      index = name;
    }
    return index;
  }

  let callsReady: Promise<void> | undefined;
  function callsIndex(): Promise<void> {
    callsReady ??= ensureIndex(callsIndexTemplate(prefix), `${prefix}-calls`).catch((error: unknown) => {
      callsReady = undefined;
      throw error;
    });
    return callsReady;
  }

  /** Bulk-indexes, retrying only items the cluster rejected for load (429), three times. */
  async function bulk(operations: unknown[]): Promise<void> {
    let pending = operations;
    for (let attempt = 0; pending.length > 0; attempt++) {
      const response = await client.bulk({ operations: pending, refresh: 'wait_for' });
      if (!response.errors) return;
      const retry: unknown[] = [];
      for (const [i, item] of response.items.entries()) {
        const result = item.index;
        if (!result?.error) continue;
        if (result.status === 429 && attempt < 3) retry.push(pending[i * 2], pending[i * 2 + 1]);
        else throw new Error(`Elasticsearch refused chunk ${result._id}: ${result.error.reason ?? result.error.type}`);
      }
      pending = retry;
      if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** attempt));
    }
  }

  return {
    name: 'elasticsearch',
    async prepare() {
      await currentIndex();
      await callsIndex();
    },
    async replaceDocument(document, chunks) {
      const name = await currentIndex();
      await client.deleteByQuery(deleteDocumentQuery(name, document.userId, document.documentId));
      if (chunks.length > 0) await bulk(bulkOperations(name, document, chunks));
    },
    async deleteDocument(userId, documentId) {
      await client.deleteByQuery(deleteDocumentQuery(await currentIndex(), userId, documentId));
    },
    async deleteKnowledgebase(userId, knowledgebaseId) {
      await client.deleteByQuery(deleteKnowledgebaseQuery(await currentIndex(), userId, knowledgebaseId));
    },
    async indexCall(call) {
      await callsIndex();
      await client.index({ index: `${prefix}-calls`, id: String(call.id), document: callDocument(call), refresh: 'wait_for' });
    },
    async searchCalls(request) {
      await callsIndex();
      const response = await client.search(callSearchQuery(`${prefix}-calls`, request) as never);
      const hits = response.hits.hits;
      const total = typeof response.hits.total === 'number' ? response.hits.total : (response.hits.total?.value ?? 0);
      const lastSort = hits.at(-1)?.sort as [number, number] | undefined;
      return {
        ids: hits.map((hit) => Number(hit._id)),
        total,
        last: lastSort ? { createdAt: new Date(lastSort[0]).toISOString(), id: Number(lastSort[1]) } : undefined,
      };
    },
    async search(request) {
      const name = await currentIndex();
      if (rrfSupported) {
        try {
          const response = await client.search<HitSource>(hybridSearch(name, request) as never);
          return response.hits.hits.filter((hit) => hit._source).map((hit) => toHit(hit._source!, hit._score ?? 0));
        } catch (error) {
          // Older clusters or licences without the RRF retriever: fuse the two rankings here.
          if (!(error instanceof errors.ResponseError) || ![400, 403].includes(error.statusCode ?? 0)) throw error;
          rrfSupported = false;
        }
      }
      const rankings = await Promise.all([
        client.search<HitSource>(textOnlySearch(name, request) as never),
        client.search<HitSource>(textOnlySearch(name, request, 'and') as never),
        client.search<HitSource>(vectorOnlySearch(name, request) as never),
      ]);
      return fuseRankings(rankings.map((ranking) => ranking.hits.hits as Hits), request.limit);
    },
  };
}
