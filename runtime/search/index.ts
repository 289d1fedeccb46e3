import type { DatabasePool } from 'slonik';
import type { Config } from '../config.js';
import type { Embedder } from '../knowledge/embedder.js';
import type { WorkerPool } from '../workers.js';
import { createElasticsearchIndex } from './elasticsearch.js';
import { createPostgresSearchIndex } from './postgres.js';
import type { SearchIndex } from './types.js';

/** Elasticsearch when ELASTICSEARCH_URL is set, PostgreSQL otherwise. */
export function createSearchIndex(config: Config, pool: DatabasePool, embedder: Embedder, workers: WorkerPool): SearchIndex {
  if (!config.elasticsearchUrl) return createPostgresSearchIndex(pool, (vectors) => workers.formatVectors(vectors));
  let dimensions: Promise<number> | undefined;
  return createElasticsearchIndex({
    url: config.elasticsearchUrl,
    dimensions: () => (dimensions ??= embedder.embed(['dimensions']).then(([vector]) => vector!.length)),
  });
}
