/**
 * Operator balance adjustments and the ledger:
 * 1. credit and debit move the balance and return it; GET /user shows it.
 * 1b. with a reference, an adjustment sent again is applied once.
 * 2. a debit below zero is 422 on amount and changes nothing; zero, non-numbers and more than six
 *    decimals are 422.
 * 3. wrong or missing admin token is 401; an unknown user is 404.
 * 4. the cached balance always equals the sum of ledger rows, also after concurrent debits
 *    of which only those covered by the balance succeed.
 * 5. the balance column cannot be changed except through a ledger row.
 * 6. without ADMIN_TOKEN the admin routes do not exist.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { ADMIN_TOKEN, startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const user = await api.user();

const adjust = (amount: unknown, token = ADMIN_TOKEN, id: number | string = user.id) =>
  api.request('POST', `/admin/users/${id}/balance`, { token, body: { amount, reason: 'support' } });

const ledgerMatches = () =>
  withClient(api.databaseUrl, async (db) => {
    const { rows } = await db.query('SELECT u.balance::text AS balance, coalesce(sum(l.amount), 0)::text AS sum FROM users u LEFT JOIN ledger_entries l ON l.user_id = u.id WHERE u.id = $1 GROUP BY u.balance', [user.id]);
    return rows[0] as { balance: string; sum: string };
  });

t.test('credit and debit', async (t) => {
  const credit = await adjust(10.5);
  t.equal(credit.status, 200);
  t.same(credit.body, { data: { balance: 10.5, applied: true } });
  const debit = await adjust(-0.25);
  t.same(debit.body, { data: { balance: 10.25, applied: true } });
  const me = await api.request('GET', '/user', { token: user.token });
  t.equal(me.body.data.balance, 10.25);
  const { balance, sum } = await ledgerMatches();
  t.equal(Number(balance), Number(sum));
});

t.test('an adjustment with a reference is applied once, however often it is sent', async (t) => {
  const holder = await api.user('Holder');
  const other = await api.user('Other');
  const send = (id: number) => api.request('POST', `/admin/users/${id}/balance`, { token: ADMIN_TOKEN, body: { amount: 2, reason: 'goodwill', reference: 'ticket-4711' } });
  const results = await Promise.all([send(holder.id), send(holder.id), send(holder.id)]);
  t.equal(results.filter((r) => r.body.data.applied).length, 1, 'one of three concurrent sends applied it');
  t.same((await send(holder.id)).body, { data: { balance: 2, applied: false } }, 'a later repeat changes nothing');
  t.equal(Number((await api.request('GET', '/user', { token: holder.token })).body.data.balance), 2);
  t.same((await send(other.id)).body, { data: { balance: 2, applied: true } }, 'references are per user');
});

t.test('refusals', async (t) => {
  const tooMuch = await adjust(-1000);
  t.equal(tooMuch.status, 422);
  t.same(tooMuch.body.errors, { amount: ['The amount may not take the balance below zero.'] });
  t.equal((await api.request('GET', '/user', { token: user.token })).body.data.balance, 10.25, 'unchanged');

  t.equal((await adjust(0)).status, 422);
  t.equal((await adjust('ten')).status, 422);
  for (const amount of [0.0000001, 1.0000004, -2.1234567, 600000.1234567, 999999.9999999]) {
    const fine = await adjust(amount);
    t.same([fine.status, fine.body.errors], [422, { amount: ['The amount may not have more than 6 decimal places.'] }], `${amount} is refused, not rounded`);
  }
  t.equal((await adjust(0.000001)).status, 200, 'a millionth is the smallest amount');
  t.equal((await adjust(0.3)).status, 200, 'decimals a double cannot hold exactly are still six or fewer');
  t.equal((await adjust(-0.3)).status, 200);
  t.equal((await adjust(0.1 + 0.2)).status, 200, 'a sum computed in floating point (0.30000000000000004)');
  t.equal((await adjust(-(0.1 + 0.2))).status, 200);
  t.equal((await adjust(-0.000001)).status, 200);
  const noReason = await api.request('POST', `/admin/users/${user.id}/balance`, { token: ADMIN_TOKEN, body: { amount: 1 } });
  t.same(noReason.body.errors, { reason: ['The reason field is required.'] });

  t.equal((await adjust(1, 'wrong-token-wrong-token')).status, 401);
  t.equal((await adjust(1, user.token)).status, 401, 'a user token is not the admin token');
  const unknown = await adjust(1, ADMIN_TOKEN, 999999);
  t.equal(unknown.status, 404);
  t.same(unknown.body, { message: 'User not found.' });
});

t.test('concurrent debits never overdraw and the ledger agrees', async (t) => {
  const results = await Promise.all(Array.from({ length: 20 }, () => adjust(-1)));
  t.equal(results.filter((r) => r.status === 200).length, 10, 'exactly the covered debits succeed');
  t.equal(results.filter((r) => r.status === 422).length, 10);
  const { balance, sum } = await ledgerMatches();
  t.equal(Number(balance), 0.25);
  t.equal(Number(sum), 0.25);
});

t.test('the balance moves only through the ledger', async (t) => {
  await t.rejects(withClient(api.databaseUrl, (db) => db.query('UPDATE users SET balance = 1000 WHERE id = $1', [user.id])), /only through ledger_entries/);
  await t.rejects(withClient(api.databaseUrl, (db) => db.query('UPDATE ledger_entries SET amount = 1000')), /append-only/);
});

t.test('admin routes are absent without ADMIN_TOKEN', async (t) => {
  const plain = await startTestPlatform(t, { adminToken: undefined });
  const res = await plain.request('POST', `/admin/users/1/balance`, { token: ADMIN_TOKEN, body: { amount: 1, reason: 'x' } });
  t.equal(res.status, 404);
  t.same(res.body, { message: 'Not found.' });
});
