import type { DatabasePool } from 'slonik';
import type { Config } from '../config.js';
import type { Embedder } from '../knowledge/embedder.js';
import { createElasticsearchIndex } from './elasticsearch.js';
import { createPostgresSearchIndex } from './postgres.js';
import type { SearchIndex } from './types.js';

/** Elasticsearch when ELASTICSEARCH_URL is set, PostgreSQL otherwise. */
export function createSearchIndex(config: Config, pool: DatabasePool, embedder: Embedder): SearchIndex {
  if (!config.elasticsearchUrl) return createPostgresSearchIndex(pool);
  let dimensions: Promise<number> | undefined;
  return createElasticsearchIndex({
    url: config.elasticsearchUrl,
    dimensions: () => (dimensions ??= embedder.embed(['dimensions']).then(([vector]) => vector!.length)),
  });
}
