/**
 * The do-not-call list:
 * 1. adding a number: 201 with the entry; again: 200, the entry as it was; a number that is not
 *    E.164 is 422.
 * 2. adding marks the owner's leads with that number that are still to be called (pending,
 *    retrying) `do-not-call`, in every campaign; leads already called, and other owners' leads,
 *    keep their status.
 * 3. the list is paginated, newest first, and holds only the owner's numbers.
 * 4. removing: by the number with its + as is or URL-encoded; 404 when it is not on the list (or
 *    on another owner's only); leads already marked stay so, and new leads are pending again.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

// The campaigns' API alone: the dialler stays still (its tests are campaign_dialler and campaign_processes).
const api = await startTestPlatform(t, { campaigns: { callsPerSecond: 5, tickMs: 3_600_000, leaseMs: 60_000 } });
const alice = await api.user('Alice');
const bob = await api.user('Bob');

async function dialler(user: { id: number; token: string }): Promise<number> {
  await api.credit(user.id, 100);
  const number = await api.phoneNumber(user.token);
  return (await api.assistant(user.token, { phone_number_id: number.id })).id;
}
const aliceAssistant = await dialler(alice);
const bobAssistant = await dialler(bob);

async function campaignWith(token: string, assistantId: number, phones: string[]): Promise<number> {
  const id = (await api.request('POST', '/user/campaigns', { token, body: { name: 'DNC', assistant_id: assistantId } })).body.data.id as number;
  await api.request('POST', `/user/campaigns/${id}/leads`, { token, body: { leads: phones.map((phone_number) => ({ phone_number })) } });
  return id;
}
async function statuses(token: string, id: number): Promise<Record<string, string>> {
  const leads = (await api.request('GET', `/user/campaigns/${id}/leads?per_page=100`, { token })).body.data as Array<{ phone_number: string; status: string }>;
  return Object.fromEntries(leads.map((l) => [l.phone_number, l.status]));
}
const add = (phone_number: unknown, token = alice.token) => api.request('POST', '/user/do-not-call', { token, body: { phone_number } });

t.test('adding a number', async (t) => {
  const res = await add('+14155550700');
  t.equal(res.status, 201);
  t.match(res.body, { message: 'Number added to the do-not-call list.', data: { phone_number: '+14155550700', created_at: /Z$/ } });
  const again = await add('+14155550700');
  t.equal(again.status, 200);
  t.equal(again.body.message, 'The number is on the do-not-call list already.');
  t.same(again.body.data, res.body.data, 'the entry as it was');
  for (const bad of ['4155550700', '+0123', 'call me', 14155550700]) {
    const refused = await add(bad);
    t.equal(refused.status, 422, String(bad));
    t.ok(refused.body.errors.phone_number, String(bad));
  }
});

t.test("adding marks the owner's leads still to be called", async (t) => {
  const first = await campaignWith(alice.token, aliceAssistant, ['+14155550710', '+14155550711']);
  const second = await campaignWith(alice.token, aliceAssistant, ['+14155550710', '+14155550712']);
  const called = await campaignWith(alice.token, aliceAssistant, ['+14155550710']);
  const bobs = await campaignWith(bob.token, bobAssistant, ['+14155550710']);
  await withClient(api.databaseUrl, async (db) => {
    await db.query(`UPDATE campaign_leads SET status = 'retrying', attempts = 1 WHERE campaign_id = $1`, [second]);
    await db.query(`UPDATE campaign_leads SET status = 'completed', attempts = 1 WHERE campaign_id = $1`, [called]);
  });

  const res = await add('+14155550710');
  t.equal(res.status, 201);
  t.equal(res.body.message, 'Number added to the do-not-call list. 2 leads will not be called.');
  t.same(await statuses(alice.token, first), { '+14155550710': 'do-not-call', '+14155550711': 'pending' });
  t.same(await statuses(alice.token, second), { '+14155550710': 'do-not-call', '+14155550712': 'retrying' });
  t.same(await statuses(alice.token, called), { '+14155550710': 'completed' }, 'a lead already called keeps its outcome');
  t.same(await statuses(bob.token, bobs), { '+14155550710': 'pending' }, "another owner's lead is not touched");
  t.match((await api.request('GET', `/user/campaigns/${first}`, { token: alice.token })).body.data.stats, { total: 2, pending: 1, do_not_call: 1 });
});

t.test('the list', async (t) => {
  const carol = await api.user('Carol');
  for (const phone of ['+14155550720', '+14155550721', '+14155550722']) t.equal((await add(phone, carol.token)).status, 201);
  await add('+14155550799', bob.token);
  const page = await api.request('GET', '/user/do-not-call?per_page=2', { token: carol.token });
  t.equal(page.status, 200);
  t.match(page.body, { total: 3, per_page: 2, current_page: 1, last_page: 2 });
  t.same(page.body.data.map((e: { phone_number: string }) => e.phone_number), ['+14155550722', '+14155550721'], 'newest first');
  const last = await api.request('GET', '/user/do-not-call?per_page=2&page=2', { token: carol.token });
  t.same(last.body.data.map((e: { phone_number: string }) => e.phone_number), ['+14155550720']);
  t.equal((await api.request('GET', '/user/do-not-call?per_page=101', { token: carol.token })).status, 422);
});

t.test('removing a number', async (t) => {
  await add('+14155550730');
  await add('+14155550731');
  const plain = await api.request('DELETE', '/user/do-not-call/+14155550730', { token: alice.token });
  t.equal(plain.status, 200);
  t.equal(plain.body.message, 'Number removed from the do-not-call list.');
  t.equal((await api.request('DELETE', '/user/do-not-call/%2B14155550731', { token: alice.token })).status, 200, 'the + URL-encoded');
  const absent = await api.request('DELETE', '/user/do-not-call/%2B14155550730', { token: alice.token });
  t.equal(absent.status, 404);
  t.same(absent.body, { message: 'The number is not on the do-not-call list.' });
  t.equal((await api.request('DELETE', '/user/do-not-call/%2B14155550799', { token: alice.token })).status, 404, "another owner's entry");
  t.equal((await api.request('DELETE', '/user/do-not-call/not-a-number', { token: alice.token })).status, 404);
  const listed = (await api.request('GET', '/user/do-not-call?per_page=100', { token: alice.token })).body.data.map((e: { phone_number: string }) => e.phone_number);
  t.notOk(listed.includes('+14155550730'));
  t.notOk(listed.includes('+14155550731'));

  // A lead marked while the number was on the list stays so; a new lead with it is pending.
  const marked = await campaignWith(alice.token, aliceAssistant, ['+14155550740']);
  await add('+14155550740');
  await api.request('DELETE', '/user/do-not-call/%2B14155550740', { token: alice.token });
  t.same(await statuses(alice.token, marked), { '+14155550740': 'do-not-call' });
  const fresh = await campaignWith(alice.token, aliceAssistant, ['+14155550740']);
  t.same(await statuses(alice.token, fresh), { '+14155550740': 'pending' });
});
