/**
 * Campaigns over the API (their dialling is the dialler's, tested elsewhere):
 * 1. create with only a name and an outbound assistant: 201, a draft whose settings take their
 *    defaults (the schedule's timezone the assistant's, mon-fri, 09:00-17:00, 5 calls at once,
 *    3 attempts an hour apart on no-answer and busy), zero stats, timestamps; GET reads it back.
 * 2. validation: required fields, ranges, retry outcomes, the schedule (zone, days, HH:MM, end
 *    after start) and the assistant (another user's, inbound, without a number) are 422 field errors.
 * 3. list: paginated with the spec's envelope, newest first, filtered by status; another user's
 *    campaigns never appear, and are 404 on every operation.
 * 4. update: given fields replace (a schedule whole, its left-out keys defaulted), others stay;
 *    404 before 422.
 * 5. moves: start needs a lead to call and a dialling assistant; draft→running→paused→running→
 *    cancelled, and every other move 422 with its reason; cancel cancels the leads still to call.
 * 6. delete: refused while running, allowed when paused; the campaign is gone.
 * 7. stats count the leads by status (pending includes retrying) and sum their attempts, on a
 *    read and on the list.
 * 8. deleting the assistant pauses its running campaigns (assistant_deleted, assistant_id null);
 *    resuming then needs another assistant, which an update gives.
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
const dialler = await api.assistant(alice.token, { timezone: 'Europe/Berlin', phone_number_id: number.id });
const bobsAssistant = await api.assistant(bob.token);

const create = (body: Record<string, unknown>, token = alice.token) => api.request('POST', '/user/campaigns', { token, body });
const get = (id: number, token = alice.token) => api.request('GET', `/user/campaigns/${id}`, { token });
const put = (id: number, body: Record<string, unknown>, token = alice.token) => api.request('PUT', `/user/campaigns/${id}`, { token, body });
const move = (id: number, to: string, token = alice.token) => api.request('POST', `/user/campaigns/${id}/${to}`, { token });
const addLeads = (id: number, leads: Array<Record<string, unknown>>) => api.request('POST', `/user/campaigns/${id}/leads`, { token: alice.token, body: { leads } });
const sql = (text: string, values: unknown[] = []) => withClient(api.databaseUrl, (db) => db.query(text, values));

t.test('create with defaults, and read it back', async (t) => {
  const res = await create({ name: 'Spring promo', assistant_id: dialler.id });
  t.equal(res.status, 201);
  t.equal(res.body.message, 'Campaign created successfully');
  const created = res.body.data;
  t.match(created, {
    id: Number,
    name: 'Spring promo',
    assistant_id: dialler.id,
    status: 'draft',
    status_reason: null,
    schedule: { timezone: 'Europe/Berlin', days: ['mon', 'tue', 'wed', 'thu', 'fri'], start_time: '09:00', end_time: '17:00' },
    max_concurrent_calls: 5,
    max_attempts: 3,
    retry_interval_minutes: 60,
    retry_on: ['no-answer', 'busy'],
    variables: {},
    stats: { total: 0, pending: 0, calling: 0, completed: 0, failed: 0, no_answer: 0, busy: 0, voicemail: 0, cancelled: 0, do_not_call: 0, attempts: 0 },
    created_at: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/,
  });
  t.same((await get(created.id)).body.data, created);

  const full = await create({
    name: 'Renewals',
    assistant_id: dialler.id,
    schedule: { timezone: 'America/New_York', days: ['sat', 'mon'], start_time: '10:30', end_time: '12:00' },
    max_concurrent_calls: 100,
    max_attempts: 10,
    retry_interval_minutes: 10_080,
    retry_on: ['voicemail', 'failed'],
    variables: { offer: '20% off', year: 2026 },
  });
  t.equal(full.status, 201);
  t.match(full.body.data, {
    schedule: { timezone: 'America/New_York', days: ['mon', 'sat'], start_time: '10:30', end_time: '12:00' },
    max_concurrent_calls: 100,
    max_attempts: 10,
    retry_interval_minutes: 10_080,
    retry_on: ['voicemail', 'failed'],
    variables: { offer: '20% off', year: 2026 },
  });
});

t.test('validation', async (t) => {
  const missing = await create({});
  t.equal(missing.status, 422);
  t.same(missing.body.errors, { name: ['The name field is required.'], assistant_id: ['The assistant id field is required.'] });

  const ranges = await create({ name: 'x', assistant_id: dialler.id, max_concurrent_calls: 0, max_attempts: 11, retry_interval_minutes: 10_081, retry_on: ['answered'] });
  t.equal(ranges.status, 422);
  t.same(ranges.body.errors['max_concurrent_calls'], ['The max concurrent calls must be between 1 and 100.']);
  t.same(ranges.body.errors['max_attempts'], ['The max attempts must be between 1 and 10.']);
  t.same(ranges.body.errors['retry_interval_minutes'], ['The retry interval minutes must be between 1 and 10080.']);
  t.ok(ranges.body.errors['retry_on.0'], 'an outcome that is not retried');

  const schedule = await create({ name: 'x', assistant_id: dialler.id, schedule: { timezone: 'Mars/Olympus', days: ['funday'], start_time: '9:00' } });
  t.equal(schedule.status, 422);
  t.ok(schedule.body.errors['schedule.days.0']);
  t.same(schedule.body.errors['schedule.start_time'], ['The schedule start time must be a time in the format HH:MM.']);
  const zone = await create({ name: 'x', assistant_id: dialler.id, schedule: { timezone: 'Mars/Olympus', start_time: '18:00' } });
  t.same(zone.body.errors, { 'schedule.timezone': ['The schedule timezone must be a valid zone.'] });
  const night = await create({ name: 'Night shift', assistant_id: dialler.id, schedule: { timezone: 'UTC', start_time: '22:00', end_time: '06:00' } });
  t.equal(night.status, 201, 'an end before the start is a window past midnight');
  t.match(night.body.data.schedule, { start_time: '22:00', end_time: '06:00' });
  const empty = await create({ name: 'x', assistant_id: dialler.id, schedule: { days: [] } });
  t.equal(empty.status, 422, 'a schedule needs a day');

  const inbound = await api.assistant(alice.token, { type: 'inbound' });
  const noNumber = await api.assistant(alice.token);
  for (const [assistantId, message] of [
    [bobsAssistant.id, 'The selected assistant id is invalid.'],
    [999_999, 'The selected assistant id is invalid.'],
    [inbound.id, 'The assistant must be an outbound assistant.'],
    [noNumber.id, 'The assistant has no phone number to call from.'],
  ] as const) {
    const res = await create({ name: 'x', assistant_id: assistantId });
    t.equal(res.status, 422);
    t.same(res.body.errors, { assistant_id: [message] }, message);
  }
  t.same((await create({ name: 'x', assistant_id: dialler.id }, bob.token)).body.errors, { assistant_id: ['The selected assistant id is invalid.'] }, "another user's assistant");
});

t.test('list, filter and isolation', async (t) => {
  const bobs = (await create({ name: 'Bob campaign', assistant_id: 0 }, bob.token)).status;
  t.equal(bobs, 422);
  const own = await Promise.all(['L1', 'L2', 'L3'].map(async (name) => (await create({ name, assistant_id: dialler.id })).body.data.id as number));
  const page = await api.request('GET', '/user/campaigns?per_page=2', { token: alice.token });
  t.equal(page.status, 200);
  t.equal(page.body.per_page, 2);
  t.equal(page.body.current_page, 1);
  t.ok(page.body.total >= 5);
  t.equal(page.body.data.length, 2);
  t.ok(page.body.data[0].id > page.body.data[1].id, 'newest first');
  t.match(page.body.next_page_url, /per_page=2&page=2$/);

  await sql(`UPDATE campaigns SET status = 'completed' WHERE id = $1`, [own[0]]);
  const completed = await api.request('GET', '/user/campaigns?status=completed', { token: alice.token });
  t.same(completed.body.data.map((c: { id: number }) => c.id), [own[0]]);
  t.equal((await api.request('GET', '/user/campaigns?status=sleeping', { token: alice.token })).status, 422);

  t.equal((await api.request('GET', '/user/campaigns', { token: bob.token })).body.total, 0, "Bob sees none of Alice's");
  const id = own[1]!;
  for (const res of [
    await get(id, bob.token),
    await put(id, { name: 'mine' }, bob.token),
    await api.request('DELETE', `/user/campaigns/${id}`, { token: bob.token }),
    await move(id, 'start', bob.token),
    await api.request('GET', `/user/campaigns/${id}/leads`, { token: bob.token }),
    await api.request('POST', `/user/campaigns/${id}/leads`, { token: bob.token, body: { leads: [{ phone_number: '+14155550100' }] } }),
  ]) {
    t.equal(res.status, 404);
    t.same(res.body, { message: 'Campaign not found' });
  }
  t.equal((await get(id)).body.data.name, 'L2', 'untouched');
});

t.test('update replaces the given fields', async (t) => {
  const id = (await create({ name: 'Before', assistant_id: dialler.id, retry_on: ['busy'], variables: { a: '1', b: '2' } })).body.data.id as number;
  const res = await put(id, { name: 'After', variables: { c: '3' }, retry_on: ['failed', 'voicemail'], schedule: { days: ['sun'] } });
  t.equal(res.status, 200);
  t.equal(res.body.message, 'Campaign updated successfully');
  t.match(res.body.data, {
    name: 'After',
    variables: { c: '3' },
    retry_on: ['failed', 'voicemail'],
    schedule: { timezone: 'Europe/Berlin', days: ['sun'], start_time: '09:00', end_time: '17:00' },
    max_concurrent_calls: 5,
  });
  t.notOk('a' in res.body.data.variables, 'variables replace');
  const schedule = await put(id, { schedule: { start_time: '08:00', end_time: '08:30', timezone: 'Asia/Tokyo' } });
  t.same(schedule.body.data.schedule, { timezone: 'Asia/Tokyo', days: ['mon', 'tue', 'wed', 'thu', 'fri'], start_time: '08:00', end_time: '08:30' }, 'a schedule replaces the whole schedule');
  const kept = await put(id, { max_attempts: 2 });
  t.same(kept.body.data.schedule, schedule.body.data.schedule, 'a schedule left out stays');
  t.equal(kept.body.data.max_attempts, 2);

  t.equal((await put(id, { max_attempts: 0 })).status, 422);
  t.same((await put(id, { assistant_id: bobsAssistant.id })).body.errors, { assistant_id: ['The selected assistant id is invalid.'] });
  t.same((await put(id, { name: '' })).body.errors, { name: ['The name field is required.'] });
  const unknown = await put(9_999_999, { max_attempts: 0 });
  t.equal(unknown.status, 404, 'not found before the body is judged');
});

t.test('moves', async (t) => {
  const id = (await create({ name: 'Moves', assistant_id: dialler.id })).body.data.id as number;
  const noLead = await move(id, 'start');
  t.equal(noLead.status, 422);
  t.same(noLead.body.errors, { leads: ['The campaign has no lead to call: add leads first.'] });
  t.same((await move(id, 'cancel')).body.errors, { status: ['A draft campaign is deleted, not cancelled.'] });
  t.same((await move(id, 'pause')).body.errors, { status: ['A draft campaign cannot be paused.'] });
  t.same((await move(id, 'resume')).body.errors, { status: ['A draft campaign cannot be resumed.'] });

  t.equal((await addLeads(id, [{ phone_number: '+14155550101' }, { phone_number: '+14155550102' }, { phone_number: '+14155550103' }])).body.data.added, 3);
  const started = await move(id, 'start');
  t.equal(started.status, 200);
  t.equal(started.body.message, 'Campaign started');
  t.match(started.body.data, { status: 'running', status_reason: null, stats: { total: 3, pending: 3 } });
  t.same((await move(id, 'start')).body.errors, { status: ['A running campaign cannot be started.'] });
  t.same((await move(id, 'resume')).body.errors, { status: ['A running campaign cannot be resumed.'] });

  await sql(`UPDATE campaigns SET status_reason = 'outside_window' WHERE id = $1`, [id]);
  const paused = await move(id, 'pause');
  t.match(paused.body.data, { status: 'paused', status_reason: null });
  t.same((await move(id, 'start')).body.errors, { status: ['A paused campaign is resumed, not started.'] });
  t.same((await move(id, 'pause')).body.errors, { status: ['A paused campaign cannot be paused.'] });
  t.equal((await move(id, 'resume')).body.data.status, 'running');

  await sql(`UPDATE campaign_leads SET status = 'calling', attempts = 1 WHERE campaign_id = $1 AND phone_number = '+14155550101'`, [id]);
  const cancelled = await move(id, 'cancel');
  t.equal(cancelled.status, 200);
  t.match(cancelled.body.data, { status: 'cancelled', stats: { total: 3, pending: 0, cancelled: 2, calling: 1 } }, 'leads still to call are cancelled; the one being called follows its call');
  for (const to of ['start', 'pause', 'resume', 'cancel']) t.same((await move(id, to)).body.errors, { status: [`A cancelled campaign cannot be ${to === 'start' ? 'started' : to === 'pause' ? 'paused' : to === 'resume' ? 'resumed' : 'cancelled'}.`] }, to);

  // A campaign whose assistant lost its number cannot start.
  const other = await create({ name: 'No number', assistant_id: dialler.id });
  await addLeads(other.body.data.id, [{ phone_number: '+14155550109' }]);
  const second = await api.assistant(alice.token, { phone_number_id: number.id });
  t.equal((await put(other.body.data.id, { assistant_id: second.id })).status, 200);
  t.equal((await api.request('PUT', `/user/assistant/${second.id}`, { token: alice.token, body: { phone_number_id: null } })).status, 200);
  t.same((await move(other.body.data.id, 'start')).body.errors, { assistant_id: ['The assistant has no phone number to call from.'] });
});

t.test('delete', async (t) => {
  const id = (await create({ name: 'Delete me', assistant_id: dialler.id })).body.data.id as number;
  await addLeads(id, [{ phone_number: '+14155550111' }]);
  await move(id, 'start');
  const refused = await api.request('DELETE', `/user/campaigns/${id}`, { token: alice.token });
  t.equal(refused.status, 422);
  t.same(refused.body.errors, { status: ['A running campaign cannot be deleted: pause or cancel it first.'] });
  await move(id, 'pause');
  const deleted = await api.request('DELETE', `/user/campaigns/${id}`, { token: alice.token });
  t.equal(deleted.status, 200);
  t.equal((await get(id)).status, 404);
  t.equal((await sql(`SELECT count(*)::int AS n FROM campaign_leads WHERE campaign_id = $1`, [id])).rows[0].n, 0, 'its leads went with it');
  t.equal((await api.request('DELETE', `/user/campaigns/${id}`, { token: alice.token })).status, 404);
});

t.test('stats count leads by status', async (t) => {
  const ids = await Promise.all(['S1', 'S2'].map(async (name) => (await create({ name, assistant_id: dialler.id })).body.data.id as number));
  const statuses = ['pending', 'retrying', 'calling', 'completed', 'completed', 'failed', 'no-answer', 'busy', 'voicemail', 'cancelled', 'do-not-call'];
  await addLeads(ids[0]!, statuses.map((_, i) => ({ phone_number: `+1415555020${String(i).padStart(2, '0')}` })));
  await addLeads(ids[1]!, [{ phone_number: '+14155550300' }]);
  for (const [i, status] of statuses.entries()) {
    await sql(`UPDATE campaign_leads SET status = $1, attempts = $2 WHERE campaign_id = $3 AND phone_number = $4`, [status, i % 3, ids[0], `+1415555020${String(i).padStart(2, '0')}`]);
  }
  const expected = { total: 11, pending: 2, calling: 1, completed: 2, failed: 1, no_answer: 1, busy: 1, voicemail: 1, cancelled: 1, do_not_call: 1, attempts: statuses.reduce((sum, _, i) => sum + (i % 3), 0) };
  t.same((await get(ids[0]!)).body.data.stats, expected);
  const listed = (await api.request('GET', '/user/campaigns?per_page=100', { token: alice.token })).body.data as Array<{ id: number; stats: Record<string, number> }>;
  t.same(listed.find((c) => c.id === ids[0])!.stats, expected, 'the list counts the same');
  t.match(listed.find((c) => c.id === ids[1])!.stats, { total: 1, pending: 1, attempts: 0 });
});

t.test("deleting the assistant pauses its running campaigns", async (t) => {
  await api.credit(alice.id, 100);
  const own = await api.phoneNumber(alice.token);
  const doomed = await api.assistant(alice.token, { phone_number_id: own.id });
  const running = (await create({ name: 'Doomed running', assistant_id: doomed.id })).body.data.id as number;
  const draft = (await create({ name: 'Doomed draft', assistant_id: doomed.id })).body.data.id as number;
  await addLeads(running, [{ phone_number: '+14155550400' }]);
  t.equal((await move(running, 'start')).status, 200);

  t.equal((await api.request('DELETE', `/user/assistant/${doomed.id}`, { token: alice.token })).status, 200);
  t.match((await get(running)).body.data, { status: 'paused', status_reason: 'assistant_deleted', assistant_id: null });
  t.match((await get(draft)).body.data, { status: 'draft', status_reason: null, assistant_id: null });

  const refused = await move(running, 'resume');
  t.equal(refused.status, 422);
  t.same(refused.body.errors, { assistant_id: ['The campaign has no assistant (it was deleted): choose one with an update.'] });
  t.equal((await put(running, { assistant_id: dialler.id })).status, 200);
  t.match((await move(running, 'resume')).body.data, { status: 'running', status_reason: null, assistant_id: dialler.id });
});
