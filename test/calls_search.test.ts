/**
 * Transcript search on the call listing: `search` through the SearchIndex (PostgreSQL here) with
 * the listing's filters applied inside the query, numbered pages and `search_after` cursors, other
 * users' calls never found; the Elasticsearch request body for the same search.
 */
import t from 'tap';
import { callSearchQuery, callsIndexTemplate } from '../runtime/search/elasticsearch.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

t.test('search with filters, pages and cursors', async (t) => {
  const api = await startTestPlatform(t);
  const alice = await api.user('Alice');
  const bob = await api.user('Bob');
  const sales = (await api.assistant(alice.token, { name: 'Sales' })).id;
  const support = (await api.assistant(alice.token, { name: 'Support' })).id;
  const bobs = (await api.assistant(bob.token, { name: 'Bob bot' })).id;
  const ids = await withClient(api.databaseUrl, async (db) => {
    const insert = async (userId: number, assistantId: number, transcript: string, at: string, status = 'completed') =>
      Number((await db.query(
        `INSERT INTO calls (user_id, assistant_id, assistant_name, type, mode, status, transcript, created_at) VALUES ($1, $2, 'A', 'outbound', 'pipeline', $3, $4, $5) RETURNING id`,
        [userId, assistantId, status, transcript, at],
      )).rows[0].id);
    const out: number[] = [];
    for (let day = 1; day <= 25; day++) out.push(await insert(alice.id, day % 2 ? sales : support, `assistant: Hello\nuser: I want a refund for order ${day}`, `2026-04-${String(day).padStart(2, '0')}T10:00:00Z`, day === 7 ? 'failed' : 'completed'));
    await insert(alice.id, sales, 'assistant: Hello\nuser: What are your opening hours?', '2026-04-26T10:00:00Z');
    await insert(bob.id, bobs, 'user: I want a refund too', '2026-04-27T10:00:00Z');
    return out;
  });
  const list = (query: string) => api.request('GET', `/user/calls?${query}`, { token: alice.token });

  const all = await list('search=refund');
  t.equal(all.status, 200);
  t.equal(all.body.total, 25, "only Alice's refund calls");
  t.same(all.body.data.map((c: { id: number }) => c.id), ids.slice(10).reverse(), 'newest first, 15 per page');
  t.type(all.body.next_search_after, 'string');
  t.match(all.body.next_page_url, /search=refund&page=2/);

  const both = await list('search=refund%20order%207');
  t.same(both.body.data.map((c: { id: number }) => c.id), [ids[6]], 'all words must occur');
  t.equal((await list('search=refund&status=failed')).body.total, 1, 'status filter inside the query');
  t.equal((await list(`search=refund&assistant_id=${support}`)).body.total, 12, 'assistant filter');
  t.equal((await list('search=refund&date_from=2026-04-10&date_to=2026-04-12')).body.total, 3, 'date filter');
  t.equal((await list('search=hours')).body.total, 1);
  t.equal((await list('search=nothinglikethis')).body.total, 0);

  const page2 = await list('search=refund&page=2');
  const cursor = await list(`search=refund&search_after=${all.body.next_search_after}`);
  t.same(cursor.body.data.map((c: { id: number }) => c.id), page2.body.data.map((c: { id: number }) => c.id), 'the cursor gives the next page');
  t.same(cursor.body.data.map((c: { id: number }) => c.id), ids.slice(0, 10).reverse());
  t.equal(cursor.body.next_search_after, null, 'no more after the last page');

  const bad = await list('search=refund&search_after=bm90IGEgY3Vyc29y');
  t.equal(bad.status, 422);
  t.same(bad.body.errors, { search_after: ['The search after cursor is invalid.'] });
  for (const crafted of ['1|5', '2026-01-01T00:00:00Z|99999999999999999999999', '0000-01-01T00:00:00Z|1', '2026-01-01T00:00:00Z|1|2']) {
    const refused = await list(`search=refund&search_after=${Buffer.from(crafted).toString('base64url')}`);
    t.same([refused.status, refused.body.errors], [422, { search_after: ['The search after cursor is invalid.'] }], `cursor ${crafted}`);
  }
  const deep = await list('search=refund&page=701&per_page=15');
  t.same([deep.status, deep.body.errors], [422, { page: ['A transcript search pages by number through its first 10000 calls; continue with search_after.'] }]);
  const long = await list(`search=${'x'.repeat(201)}`);
  t.equal(long.status, 422);
});

t.test('a call is searchable as soon as it ends', async (t) => {
  const s = await voiceSetup(t);
  const { phone, callId } = await callIn(s, ['My parcel tracking number is missing.']);
  await phone.untilAgentDone();
  await phone.turn(800);
  phone.phone.hangUp();
  await endedCall(s, callId);
  const found = await s.api.request('GET', '/user/calls?search=parcel%20tracking', { token: s.token });
  t.same(found.body.data.map((c: { id: number }) => c.id), [callId]);
});

t.test('the Elasticsearch request for a filtered transcript search', async (t) => {
  t.same(callSearchQuery('ap-calls', { userId: 7, text: 'refund order', filters: { status: 'completed', assistantId: 3, dateFrom: '2026-04-10', dateTo: '2026-04-12' }, size: 15, from: 15 }), {
    index: 'ap-calls',
    query: {
      bool: {
        must: [{ match: { transcript: { query: 'refund order', operator: 'and' } } }],
        filter: [{ term: { user_id: '7' } }, { term: { status: 'completed' } }, { term: { assistant_id: '3' } }, { range: { created_at: { gte: '2026-04-10T00:00:00Z', lt: '2026-04-12T00:00:00Z||+1d' } } }],
      },
    },
    sort: [{ created_at: { order: 'desc' } }, { id: { order: 'desc' } }],
    size: 15,
    track_total_hits: true,
    _source: false,
    from: 15,
  });
  const after = callSearchQuery('ap-calls', { userId: 7, text: 'refund', filters: {}, size: 15, from: 0, after: { createdAt: '2026-04-10T10:00:00.000000Z', id: 42 } });
  t.same((after as { search_after?: unknown }).search_after, [Date.parse('2026-04-10T10:00:00.000Z'), 42]);
  t.notOk('from' in after, 'search_after instead of an offset');
  t.equal(callsIndexTemplate('ap').template.mappings.properties.transcript.type, 'text');
});
