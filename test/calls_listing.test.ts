/**
 * Call records and their listing (spec 2.10, 4.7). Calls are written here with SQL, as the voice
 * engine will write them:
 * 1. GET /user/calls/{id}: every field of 2.10 with `<datetime>` timestamps; another user's call 404.
 * 2. the listing: newest first, each filter of 4.7, the pagination envelope; bad values and another
 *    user's assistant or campaign are 422 with field errors; another user's calls never appear.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const alice = await api.user('Alice');
const bob = await api.user('Bob');

const assistant = async (token: string, name: string): Promise<number> => (await api.assistant(token, { name })).id;

const sales = await assistant(alice.token, 'Sales');
const support = await assistant(alice.token, 'Support');
const bobs = await assistant(bob.token, 'Bob bot');

const ids = await withClient(api.databaseUrl, async (db) => {
  const campaign = Number((await db.query(`INSERT INTO campaigns (user_id, name) VALUES ($1, 'Spring promo') RETURNING id`, [alice.id])).rows[0].id);
  const bobCampaign = Number((await db.query(`INSERT INTO campaigns (user_id, name) VALUES ($1, 'Bob promo') RETURNING id`, [bob.id])).rows[0].id);
  const insert = async (userId: number, assistantId: number, name: string, values: Record<string, unknown>) =>
    Number(
      (
        await db.query(
          `INSERT INTO calls (user_id, assistant_id, assistant_name, campaign_id, type, mode, status, duration, assistant_phone_number, client_phone_number, transcript, variables, evaluation, webhook_response, carrier_cost, total_cost, answered_by, created_at)
           VALUES ($1, $2, $3, $4, $5, 'pipeline', $6, $7, '+14155550100', $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id`,
          [userId, assistantId, name, values.campaign ?? null, values.type ?? 'outbound', values.status ?? 'completed', values.duration ?? 60, values.client ?? '+4915112345678',
            values.transcript ?? 'assistant: Hi\nuser: Hello', JSON.stringify(values.variables ?? {}), values.evaluation ? JSON.stringify(values.evaluation) : null,
            values.webhook ? JSON.stringify(values.webhook) : null, values.carrier ?? 0.012, values.total ?? 0.1, values.answeredBy ?? 'human', values.at ?? '2026-03-01T10:00:00Z'],
        )
      ).rows[0].id,
    );
  return {
    campaign,
    bobCampaign,
    first: await insert(alice.id, sales, 'Sales', { at: '2026-03-01T10:00:00Z', campaign, variables: { name: 'Ada' }, evaluation: { interested: true }, webhook: { status: 200, body: 'ok' } }),
    second: await insert(alice.id, support, 'Support', { at: '2026-03-02T23:59:59Z', type: 'inbound', status: 'no-answer', duration: 0, client: '+14155550123', answeredBy: 'unknown' }),
    third: await insert(alice.id, sales, 'Sales', { at: '2026-03-03T00:00:00Z', type: 'web', status: 'ended_by_customer', client: null }),
    bobs: await insert(bob.id, bobs, 'Bob bot', { campaign: bobCampaign }),
  };
});

t.test('one call', async (t) => {
  const res = await api.request('GET', `/user/calls/${ids.first}`, { token: alice.token });
  t.equal(res.status, 200);
  t.same(res.body.data, {
    id: ids.first,
    assistant_name: 'Sales',
    campaign_name: 'Spring promo',
    type: 'outbound',
    duration: 60,
    assistant_phone_number: '+14155550100',
    client_phone_number: '+4915112345678',
    status: 'completed',
    transcript: 'assistant: Hi\nuser: Hello',
    variables: { name: 'Ada' },
    evaluation: { interested: true },
    webhook_response: { status: 200, body: 'ok' },
    carrier_cost: 0.012,
    total_cost: 0.1,
    answered_by: 'human',
    recording_url: null,
    created_at: '2026-03-01 10:00:00',
    updated_at: res.body.data.updated_at,
  });
  t.match(res.body.data.updated_at, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
  const foreign = await api.request('GET', `/user/calls/${ids.bobs}`, { token: alice.token });
  t.same([foreign.status, foreign.body], [404, { message: 'Call not found' }]);
  t.equal((await api.request('GET', '/user/calls/abc', { token: alice.token })).status, 404);
});

t.test('listing and filters', async (t) => {
  const all = await api.request('GET', '/user/calls', { token: alice.token });
  t.match(all.body, { current_page: 1, per_page: 15, total: 3, from: 1, to: 3 });
  t.same(all.body.data.map((c: { id: number }) => c.id), [ids.third, ids.second, ids.first], 'newest first');
  const filtered = async (query: string) => (await api.request('GET', `/user/calls?${query}`, { token: alice.token })).body.data.map((c: { id: number }) => c.id);
  t.same(await filtered('status=no-answer'), [ids.second]);
  t.same(await filtered('type=web'), [ids.third]);
  t.same(await filtered('phone_number=%2B14155550123'), [ids.second]);
  t.same(await filtered(`assistant_id=${sales}`), [ids.third, ids.first]);
  t.same(await filtered(`campaign_id=${ids.campaign}`), [ids.first]);
  t.same(await filtered('date_from=2026-03-02&date_to=2026-03-02'), [ids.second], 'inclusive UTC days');
  t.same(await filtered('date_from=2026-03-03'), [ids.third]);
  const paged = await api.request('GET', '/user/calls?per_page=2&page=2', { token: alice.token });
  t.match(paged.body, { current_page: 2, last_page: 2, from: 3, to: 3, total: 3, prev_page_url: /page=1/, next_page_url: null });
  t.same(paged.body.data.map((c: { id: number }) => c.id), [ids.first]);

  const invalid = await api.request('GET', `/user/calls?status=done&type=fax&per_page=500&date_from=2026-13-01&assistant_id=${bobs}`, { token: alice.token });
  t.equal(invalid.status, 422);
  t.same(Object.keys(invalid.body.errors).sort(), ['per_page', 'status', 'type']);
  t.same((await api.request('GET', `/user/calls?assistant_id=${bobs}`, { token: alice.token })).body.errors, { assistant_id: ['The selected assistant id is invalid.'] });
  t.same((await api.request('GET', `/user/calls?campaign_id=${ids.bobCampaign}`, { token: alice.token })).body.errors, { campaign_id: ['The selected campaign id is invalid.'] });
  t.same((await api.request('GET', '/user/calls?date_to=2026-02-30', { token: alice.token })).body.errors, { date_to: ['The date to is not a valid date.'] });
  const bobsList = await api.request('GET', '/user/calls', { token: bob.token });
  t.same(bobsList.body.data.map((c: { id: number }) => c.id), [ids.bobs], 'only their own calls');
  t.equal((await api.request('GET', '/user/calls')).status, 401);
});
