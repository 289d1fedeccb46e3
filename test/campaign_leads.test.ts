/**
 * Adding and listing a campaign's leads:
 * 1. JSON: good leads are kept with their variables, bad ones reported by index from 0 (missing,
 *    not E.164, not text); spaces, dashes and brackets in a number are dropped; duplicates in the
 *    upload and in the campaign are skipped and counted.
 * 2. CSV (multipart, field `file`): the header is line 1; bad rows are reported with their line;
 *    quoted fields hold delimiters, doubled quotes and line breaks (the lines after them count
 *    on); CRLF, a byte order mark, blank lines and semicolons are read; every other column is a
 *    variable with a text value, named by its header.
 * 3. refusals: no phone_number column, an unclosed quote, no file, no leads, a completed or
 *    cancelled campaign: 422, nothing added.
 * 4. numbers on the do-not-call list are added as do-not-call and counted.
 * 5. limits: 100,000 rows are added in seconds; one more row, or a file over 20 MB, is 422 and
 *    adds nothing.
 * 6. listing: the lead's fields, next_attempt_at only while it is to be called, the status filter,
 *    pagination, and another user's campaign is 404.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

// The campaigns' API alone: the dialler stays still (its tests are campaign_dialler and campaign_processes).
const api = await startTestPlatform(t, { campaigns: { callsPerSecond: 5, tickMs: 3_600_000, leaseMs: 60_000 } });
const alice = await api.user('Alice');
const bob = await api.user('Bob');
await api.credit(alice.id, 100);
const number = await api.phoneNumber(alice.token);
const dialler = await api.assistant(alice.token, { phone_number_id: number.id });

async function campaign(name = 'Leads'): Promise<number> {
  const res = await api.request('POST', '/user/campaigns', { token: alice.token, body: { name, assistant_id: dialler.id } });
  return res.body.data.id as number;
}
const addJson = (id: number, leads: unknown[]) => api.request('POST', `/user/campaigns/${id}/leads`, { token: alice.token, body: { leads } });
function addCsv(id: number, content: string | Uint8Array, filename = 'leads.csv') {
  const form = new FormData();
  form.set('file', new Blob([content], { type: 'text/csv' }), filename);
  return api.request('POST', `/user/campaigns/${id}/leads`, { token: alice.token, raw: form });
}
async function leadsOf(id: number, query = 'per_page=100'): Promise<Array<Record<string, any>>> {
  return (await api.request('GET', `/user/campaigns/${id}/leads?${query}`, { token: alice.token })).body.data;
}
const leadCount = async (id: number) => (await withClient(api.databaseUrl, (db) => db.query(`SELECT count(*)::int AS n FROM campaign_leads WHERE campaign_id = $1`, [id]))).rows[0].n as number;

t.test('JSON leads: kept, refused by index, duplicates counted', async (t) => {
  const id = await campaign();
  const res = await addJson(id, [
    { phone_number: '+14155550100', variables: { first_name: 'Ada', score: 7, vip: true } },
    { phone_number: '4155550101' },
    { variables: { first_name: 'Nobody' } },
    { phone_number: '+1 (415) 555-0102' },
    { phone_number: 14155550103 },
    { phone_number: '+14155550100' },
  ]);
  t.equal(res.status, 200);
  t.equal(res.body.message, '2 leads added');
  t.same(res.body.data, {
    added: 2,
    skipped_duplicates: 1,
    do_not_call: 0,
    invalid: [
      { line: 1, phone_number: '4155550101', reason: 'The phone number must be in E.164 format (for example +14155550100).' },
      { line: 2, phone_number: '', reason: 'The phone number is required.' },
      { line: 4, phone_number: '14155550103', reason: 'The phone number must be in E.164 format (for example +14155550100).' },
    ],
  });
  const leads = await leadsOf(id);
  t.same(leads.map((l) => [l.phone_number, l.variables]), [['+14155550100', { first_name: 'Ada', score: 7, vip: true }], ['+14155550102', {}]], 'in the order given, the formatting dropped');

  const again = await addJson(id, [{ phone_number: '+14155550102' }, { phone_number: '+14155550104' }]);
  t.match(again.body.data, { added: 1, skipped_duplicates: 1, invalid: [] }, "a number the campaign has is skipped");
  const other = await campaign('Other');
  t.equal((await addJson(other, [{ phone_number: '+14155550100' }])).body.data.added, 1, 'another campaign may call the same number');

  const bad = await addJson(id, [{ phone_number: '+14155550105', variables: { 'not a name': 'x' } }]);
  t.equal(bad.status, 422, 'variables must be a record of names');
  const none = await api.request('POST', `/user/campaigns/${id}/leads`, { token: alice.token, body: {} });
  t.same(none.body.errors, { leads: ['The leads field is required when no file is sent.'] });
});

t.test('CSV: lines, quoting, BOM, CRLF and variables', async (t) => {
  const id = await campaign();
  const csv = [
    '\uFEFFFirst Name,phone_number,note,Company',
    'Ada,+14155550200,"likes ""tea"", a lot",Acme',
    'Bob,not-a-number,,Initech',
    '"Multi',
    'Line",+14155550201,"a,b",',
    '',
    'Eve,+14155550202,extra,Corp,surplus',
    ',,,',
    'Mallory,,none,X',
    'Trent,+14155550200,dup,Y',
    'Zed,+44 20 7946 0958,,Z',
  ].join('\r\n');
  const res = await addCsv(id, `${csv}\r\n`);
  t.equal(res.status, 200);
  t.same(res.body.data, {
    added: 3,
    skipped_duplicates: 1,
    do_not_call: 0,
    invalid: [
      { line: 3, phone_number: 'not-a-number', reason: 'The phone number must be in E.164 format (for example +14155550100).' },
      { line: 7, phone_number: '+14155550202', reason: 'The row has 5 fields; the header has 4.' },
      { line: 9, phone_number: '', reason: 'The phone number is required.' },
    ],
  });
  t.same(
    (await leadsOf(id)).map((l) => [l.phone_number, l.variables]),
    [
      ['+14155550200', { first_name: 'Ada', note: 'likes "tea", a lot', Company: 'Acme' }],
      ['+14155550201', { first_name: 'Multi\r\nLine', note: 'a,b', Company: '' }],
      ['+442079460958', { first_name: 'Zed', note: '', Company: 'Z' }],
    ],
    'a header that is a name already stays as it is; others become one',
  );

  const semicolons = await campaign();
  const lf = await addCsv(semicolons, 'phone_number;city\n+14155550300;"Paris; France"\n+14155550301;Berlin\nbad;Rome');
  t.match(lf.body.data, { added: 2, invalid: [{ line: 4, phone_number: 'bad' }] }, 'semicolons and LF line ends');
  t.same((await leadsOf(semicolons)).map((l) => l.variables.city), ['Paris; France', 'Berlin']);
});

t.test('refusals add nothing', async (t) => {
  const id = await campaign();
  const noColumn = await addCsv(id, 'name,phone\nAda,+14155550400\n');
  t.equal(noColumn.status, 422);
  t.same(noColumn.body.errors, { file: ['The file must have a phone_number column.'] });
  const unclosed = await addCsv(id, 'phone_number,note\n+14155550400,fine\n+14155550401,"never closed\n+14155550402,x\n');
  t.same(unclosed.body.errors, { file: ['The quoted field that starts on line 3 is never closed.'] });
  t.same((await addCsv(id, '')).body.errors, { file: ['The file must have a header with a phone_number column.'] });
  const form = new FormData();
  form.set('name', 'no file');
  t.same((await api.request('POST', `/user/campaigns/${id}/leads`, { token: alice.token, raw: form })).body.errors, { file: ['A CSV file is required in the field file.'] });
  t.equal(await leadCount(id), 0);

  await withClient(api.databaseUrl, (db) => db.query(`UPDATE campaigns SET status = 'completed' WHERE id = $1`, [id]));
  const completed = await addJson(id, [{ phone_number: '+14155550400' }]);
  t.equal(completed.status, 422);
  t.same(completed.body.errors, { status: ['Leads cannot be added to a completed campaign.'] });
  await withClient(api.databaseUrl, (db) => db.query(`UPDATE campaigns SET status = 'cancelled' WHERE id = $1`, [id]));
  t.same((await addCsv(id, 'phone_number\n+14155550400\n')).body.errors, { status: ['Leads cannot be added to a cancelled campaign.'] });
  t.equal(await leadCount(id), 0);
});

t.test('numbers on the do-not-call list are added as do-not-call', async (t) => {
  const id = await campaign();
  t.equal((await api.request('POST', '/user/do-not-call', { token: alice.token, body: { phone_number: '+14155550500' } })).status, 201);
  await api.request('POST', '/user/do-not-call', { token: bob.token, body: { phone_number: '+14155550501' } });
  const res = await addCsv(id, 'phone_number\n+14155550500\n+14155550501\n');
  t.match(res.body.data, { added: 2, do_not_call: 1 });
  t.match((await leadsOf(id)).map((l) => [l.phone_number, l.status, l.next_attempt_at]), [['+14155550500', 'do-not-call', null], ['+14155550501', 'pending', /Z$/]], "only the owner's list counts");
});

t.test('limits', async (t) => {
  const id = await campaign('Big');
  const rows = (count: number) => `phone_number,n\n${Array.from({ length: count }, (_, i) => `+1${String(2_000_000_000 + i)},${i}`).join('\n')}\n`;
  const started = performance.now();
  const big = await addCsv(id, rows(100_000));
  const seconds = (performance.now() - started) / 1000;
  t.equal(big.status, 200);
  t.same(big.body.data, { added: 100_000, skipped_duplicates: 0, do_not_call: 0, invalid: [] });
  t.ok(seconds < 60, `100,000 leads in ${seconds.toFixed(1)} s`);
  const page = await api.request('GET', `/user/campaigns/${id}/leads?per_page=1&page=100000`, { token: alice.token });
  t.match(page.body, { total: 100_000, data: [{ phone_number: '+12000099999', variables: { n: '99999' } }] });

  const over = await campaign('Over');
  const tooMany = await addCsv(over, rows(100_001));
  t.equal(tooMany.status, 422);
  t.same(tooMany.body.errors, { file: ['The file may not have more than 100000 rows.'] });
  t.equal(await leadCount(over), 0, 'nothing of it is kept');
  const json = await addJson(over, Array.from({ length: 100_001 }, (_, i) => ({ phone_number: `+1${2_000_000_000 + i}` })));
  t.equal(json.status, 422);
  t.same(json.body.errors, { leads: ['The leads may not have more than 100000 items.'] });

  const large = new Uint8Array(20 * 1024 * 1024 + 1).fill(0x41);
  const tooLarge = await addCsv(over, large);
  t.equal(tooLarge.status, 422);
  t.same(tooLarge.body.errors, { file: ['The file may not be greater than 20480 kilobytes.'] });
  t.equal(await leadCount(over), 0);
});

t.test('listing', async (t) => {
  const id = await campaign();
  await addJson(id, ['+14155550600', '+14155550601', '+14155550602', '+14155550603'].map((phone_number) => ({ phone_number, variables: { k: phone_number } })));
  await withClient(api.databaseUrl, async (db) => {
    await db.query(`UPDATE campaign_leads SET status = 'completed', attempts = 1 WHERE campaign_id = $1 AND phone_number = '+14155550601'`, [id]);
    await db.query(`UPDATE campaign_leads SET status = 'retrying', attempts = 1, next_attempt_at = '2030-01-01T10:00:00Z' WHERE campaign_id = $1 AND phone_number = '+14155550602'`, [id]);
  });
  const all = await leadsOf(id);
  t.same(Object.keys(all[0]!).sort(), ['attempts', 'id', 'last_call_id', 'next_attempt_at', 'phone_number', 'status', 'updated_at', 'variables']);
  t.match(all, [
    { phone_number: '+14155550600', status: 'pending', attempts: 0, last_call_id: null, next_attempt_at: /^\d{4}-.*Z$/ },
    { phone_number: '+14155550601', status: 'completed', attempts: 1, next_attempt_at: null },
    { phone_number: '+14155550602', status: 'retrying', next_attempt_at: '2030-01-01T10:00:00.000000Z' },
    { phone_number: '+14155550603', status: 'pending' },
  ]);
  const retrying = await api.request('GET', `/user/campaigns/${id}/leads?status=retrying`, { token: alice.token });
  t.same(retrying.body.data.map((l: { phone_number: string }) => l.phone_number), ['+14155550602']);
  t.equal(retrying.body.total, 1);
  const second = await api.request('GET', `/user/campaigns/${id}/leads?per_page=2&page=2`, { token: alice.token });
  t.match(second.body, { current_page: 2, per_page: 2, total: 4, from: 3, to: 4, last_page: 2, next_page_url: null });
  t.same(second.body.data.map((l: { phone_number: string }) => l.phone_number), ['+14155550602', '+14155550603']);
  t.equal((await api.request('GET', `/user/campaigns/${id}/leads?status=asleep`, { token: alice.token })).status, 422);
  t.equal((await api.request('GET', `/user/campaigns/${id}/leads`, { token: bob.token })).status, 404);
});
