/**
 * The Elasticsearch search index:
 * 1. its request bodies (index template with mappings, bulk lines, hybrid RRF query, the fallback
 *    queries, delete-by-query) equal fixtures written from the Elasticsearch reference;
 * 2. client-side fusion matches reciprocal rank fusion;
 * 3. with ELASTICSEARCH_URL set, the shared contract suite runs against the real cluster
 *    (without it, that part is skipped and says so).
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import {
  bulkOperations,
  createElasticsearchIndex,
  deleteDocumentQuery,
  fuseRankings,
  hybridSearch,
  indexTemplate,
  textOnlySearch,
  vectorOnlySearch,
} from '../runtime/search/elasticsearch.js';
import { LOCAL_DIMENSIONS } from '../workers/embed.js';
import { searchIndexContract } from './helpers/searchContract.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/elasticsearch/${name}.json`, import.meta.url), 'utf8'));
const roundTrip = (value: unknown) => JSON.parse(JSON.stringify(value));

const request = {
  userId: 7,
  knowledgebaseId: 3,
  text: 'how long do refunds take',
  embedding: Float32Array.from([0.6, 0.8, 0]),
  embeddingModel: 'local-hashed-ngrams-384',
  language: 'en',
  limit: 5,
};

t.test('request bodies match the fixtures', async (t) => {
  t.same(roundTrip(indexTemplate('assistant-platform', 3)), fixture('index_template'));
  t.same(
    roundTrip(bulkOperations('assistant-platform-chunks-3', { userId: 7, knowledgebaseId: 3, documentId: 42, language: 'en', embeddingModel: 'local-hashed-ngrams-384' }, [
      { index: 0, content: 'Refunds are issued within 14 days.', source: 'page 2', embedding: Float32Array.from([0.6, 0.8, 0]) },
    ])),
    fixture('bulk'),
  );
  t.same(roundTrip(hybridSearch('assistant-platform-chunks-3', request)), fixture('search_hybrid'));
  t.same(roundTrip(textOnlySearch('assistant-platform-chunks-3', request)), fixture('search_text'));
  t.same(roundTrip(vectorOnlySearch('assistant-platform-chunks-3', request)), fixture('search_vector'));
  t.same(roundTrip(deleteDocumentQuery('assistant-platform-chunks-3', 7, 42)), fixture('delete_document'));
});

t.test('client-side fusion', async (t) => {
  const hit = (id: string) => ({ _id: id, _source: { document_id: id.split(':')[0]!, content: id, source: null } });
  const fused = fuseRankings([[hit('1:0'), hit('2:0'), hit('3:0')], [hit('2:0'), hit('4:0')]], 3);
  t.same(fused.map((h) => h.content), ['2:0', '1:0', '4:0']);
  t.equal(fused[0]!.score, 1 / 62 + 1 / 61);
});

const url = process.env.ELASTICSEARCH_URL;
if (url) {
  const prefix = `ap-test-${Date.now()}`;
  searchIndexContract(t, async () => ({
    index: createElasticsearchIndex({ url, prefix, dimensions: async () => LOCAL_DIMENSIONS }),
    a: { userId: 1, kb1: 1, kb2: 2, docs: [1, 2, 3] },
    b: { userId: 2, kb: 3, doc: 4 },
  }));
} else {
  t.test('contract against a live cluster', { skip: 'ELASTICSEARCH_URL is not set; see README to run it against a cluster' }, () => undefined);
}
