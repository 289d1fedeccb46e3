import type { Test } from 'tap';
import type { SearchIndex } from '../../runtime/search/types.js';
import { embedLocal } from '../../workers/embed.js';

/**
 * The behaviour every SearchIndex must show, run against PostgreSQL always and Elasticsearch when
 * ELASTICSEARCH_URL is set. The caller provides documents that exist for the backend (rows in
 * PostgreSQL) for two users: user A with knowledgebases 1 and 2, user B with one knowledgebase.
 */
export interface ContractFixture {
  readonly index: SearchIndex;
  readonly a: { readonly userId: number; readonly kb1: number; readonly kb2: number; readonly docs: readonly [number, number, number] };
  readonly b: { readonly userId: number; readonly kb: number; readonly doc: number };
}

const MODEL = 'local-hashed-ngrams-384';
const chunk = (index: number, content: string, source: string | null = null) => ({ index, content, source, embedding: embedLocal(content) });

export function searchIndexContract(t: Test, setup: () => Promise<ContractFixture>): void {
  t.test('search index contract', async (t) => {
    const { index, a, b } = await setup();
    await index.prepare();
    const [manual, faq, other] = a.docs;
    const doc = (userId: number, knowledgebaseId: number, documentId: number) => ({ userId, knowledgebaseId, documentId, language: 'en', embeddingModel: MODEL });
    const query = (userId: number, knowledgebaseId: number, text: string, limit = 5, embeddingModel = MODEL) =>
      index.search({ userId, knowledgebaseId, text, embedding: embedLocal(text), embeddingModel, language: 'en', limit });

    await index.replaceDocument(doc(a.userId, a.kb1, manual), [
      chunk(0, 'Installation: plug the device in and hold the power button for five seconds.', 'page 1'),
      chunk(1, 'Refunds are issued within 14 days of purchase to the original card.', 'page 2'),
      chunk(2, 'The warranty covers two years of normal use.', 'page 3'),
    ]);
    await index.replaceDocument(doc(a.userId, a.kb1, faq), [chunk(0, 'Our support line is open from 9 am to 5 pm on weekdays.', 'https://example.com/faq')]);
    await index.replaceDocument(doc(a.userId, a.kb2, other), [chunk(0, 'Refunds for gift cards are never possible.')]);
    await index.replaceDocument(doc(b.userId, b.kb, b.doc), [chunk(0, 'Refunds at the other company take 90 days.')]);

    const refunds = await query(a.userId, a.kb1, 'how long do refunds take');
    t.match(refunds[0], { documentId: manual, content: /14 days/, source: 'page 2' }, 'the answering passage ranks first');
    t.ok(refunds.every((hit, i) => i === 0 || hit.score <= refunds[i - 1]!.score), 'scores descend');
    t.notOk(refunds.some((hit) => /gift cards|90 days/.test(hit.content)), 'no passage of another knowledgebase or user');

    const support = await query(a.userId, a.kb1, 'when can I call support');
    t.match(support[0], { documentId: faq, source: 'https://example.com/faq' });

    const fuzzy = await query(a.userId, a.kb1, 'warranties', 1);
    t.equal(fuzzy.length, 1, 'limit respected');
    t.match(fuzzy[0], { content: /warranty/ }, 'word pieces match through the vectors');

    const otherModel = await query(a.userId, a.kb1, 'installation power button', 5, 'another-model');
    t.match(otherModel[0], { content: /Installation/ }, 'text ranking works when no vector is comparable');

    await index.replaceDocument(doc(a.userId, a.kb1, manual), [chunk(0, 'Refunds now take 30 days.')]);
    const replaced = await query(a.userId, a.kb1, 'refunds');
    t.ok(replaced.some((hit) => /30 days/.test(hit.content)));
    t.notOk(replaced.some((hit) => /14 days|warranty/.test(hit.content)), 'old chunks replaced');

    await index.deleteDocument(a.userId, manual);
    t.notOk((await query(a.userId, a.kb1, 'refunds')).some((hit) => hit.documentId === manual), 'deleted document gone');
    await index.deleteDocument(b.userId, faq);
    t.ok((await query(a.userId, a.kb1, 'support')).some((hit) => hit.documentId === faq), 'another user cannot delete it');

    await index.deleteKnowledgebase(a.userId, a.kb1);
    t.same(await query(a.userId, a.kb1, 'support'), []);
    t.ok((await query(a.userId, a.kb2, 'gift cards refunds')).length > 0, 'other knowledgebases untouched');
    t.ok((await query(b.userId, b.kb, 'refunds')).length > 0);
  });
}
