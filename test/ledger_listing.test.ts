/**
 * GET /user/transactions, the owner's ledger:
 * 1. every kind of entry an owner gets (an operator's credit with its reference, a number's first
 *    month, a widget message's charge, a call's charge), last posted first, each with its amount
 *    (negative for a debit), the balance after it and what it is for (call, conversation, phone
 *    number, operator reference), in the pagination envelope;
 * 2. filters by type and by UTC day (inclusive), and pages (per_page, page, links);
 * 3. invalid filters answer 422 with field errors; another owner sees none of these entries;
 *    without a token, 401.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { ADMIN_TOKEN, startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const owner = await api.user();
const stranger = await api.user();

const list = async (query = '', token = owner.token) => api.request('GET', `/user/transactions${query}`, { token });

/** Posts a call's charge as a call's end does (the call row and its ledger entry written with SQL). */
async function chargeCall(amount: number, createdAt?: string): Promise<number> {
  return withClient(api.databaseUrl, async (db) => {
    const callId = Number((await db.query(
      `INSERT INTO calls (user_id, assistant_name, type, mode, status, duration) VALUES ($1, 'Caller', 'outbound', 'pipeline', 'completed', 60) RETURNING id`,
      [owner.id],
    )).rows[0].id);
    await db.query(
      `INSERT INTO ledger_entries (user_id, amount, balance_after, kind, reason, reference, created_at) VALUES ($1, $2, 0, 'call', $3, $4, coalesce($5::timestamptz, now()))`,
      [owner.id, -amount, `Call ${callId}`, String(callId), createdAt ?? null],
    );
    return callId;
  });
}

let number: { id: number; number: string };
let conversation: string;
let callId: number;
t.before(async () => {
  const credit = await api.request('POST', `/admin/users/${owner.id}/balance`, { token: ADMIN_TOKEN, body: { amount: 10, reason: 'Welcome credit', reference: 'invoice-17' } });
  if (credit.status !== 200) throw new Error(`credit failed: ${credit.status}`);
  number = await api.phoneNumber(owner.token);
  const bot = await api.assistant(owner.token);
  conversation = (await api.request('POST', '/conversations', { body: { assistant_id: bot.uuid } })).body.conversation_id;
  const sent = await api.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'hello' } });
  if (sent.status !== 200) throw new Error(`message failed: ${sent.status}`);
  await api.platform.runtime.settled();
  callId = await chargeCall(0.25);
});

t.test('every kind of entry, newest first, with the balance after it and what it is for', async (t) => {
  const res = await list();
  t.equal(res.status, 200);
  const page = res.body;
  t.match(page, { current_page: 1, per_page: 15, total: 4, from: 1, to: 4, last_page: 1, next_page_url: null, prev_page_url: null, path: `${api.origin}/api/user/transactions` });
  const [call, message, rental, welcome] = page.data;
  const none = { call_id: null, conversation_id: null, phone_number_id: null, phone_number: null, admin_reference: null };
  t.same(welcome, { ...none, id: welcome.id, type: 'admin_credit', amount: 10, balance_after: 10, description: 'Welcome credit', admin_reference: 'invoice-17', created_at: welcome.created_at });
  t.match(welcome.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/, '<iso_timestamp>');
  t.match(rental, { ...none, type: 'phone_number', phone_number_id: number.id, phone_number: number.number, description: `First month of ${number.number}` });
  t.ok(rental.amount < 0, 'a debit is negative');
  t.equal(rental.balance_after, Math.round((10 + rental.amount) * 1e6) / 1e6);
  t.match(message, { ...none, type: 'conversation_message', amount: -0.01, conversation_id: conversation });
  t.equal(message.balance_after, Math.round((rental.balance_after - 0.01) * 1e6) / 1e6);
  t.match(call, { ...none, type: 'call', amount: -0.25, call_id: callId, description: `Call ${callId}` });
  t.equal(call.balance_after, Math.round((message.balance_after - 0.25) * 1e6) / 1e6);
  t.equal(call.balance_after, (await api.request('GET', '/user', { token: owner.token })).body.data.balance, 'the last balance after is the balance');
});

t.test('filters and pages', async (t) => {
  t.same((await list('?type=call')).body.data.map((e: { type: string }) => e.type), ['call']);
  t.same((await list('?type=admin_credit')).body.data.map((e: { amount: number }) => e.amount), [10]);
  t.equal((await list('?type=conversation_refund')).body.total, 0);

  const older = await chargeCall(0.5, '2025-06-30T23:59:59Z');
  const day = (await list('?date_from=2025-06-30&date_to=2025-06-30')).body;
  t.same(day.data.map((e: { call_id: number }) => e.call_id), [older], 'the whole UTC day, inclusive');
  t.equal((await list('?date_to=2025-06-29')).body.total, 0);
  t.equal((await list('?date_from=2025-07-01')).body.total, 4, 'the entries since');

  const second = (await list('?per_page=2&page=2&type=')).body;
  t.match(second, { current_page: 2, per_page: 2, total: 5, from: 3, to: 4, last_page: 3 });
  t.equal(second.data.length, 2);
  t.match(second.next_page_url, /\/api\/user\/transactions\?per_page=2&page=3&type=$/);
  t.same(second.data.map((e: { type: string }) => e.type), ['conversation_message', 'phone_number'], 'in the order they were posted, last first');
});

t.test('validation, ownership, authentication', async (t) => {
  const bad = await list('?type=refund&date_from=2026-02-30&per_page=101');
  t.equal(bad.status, 422);
  t.equal(typeof bad.body.message, 'string');
  t.same(Object.keys(bad.body.errors).sort(), ['per_page', 'type']);
  const day = await list('?date_from=2026-02-30');
  t.same([day.status, day.body.errors], [422, { date_from: ['The date from is not a valid date.'] }]);
  const shape = await list('?date_to=30.06.2025');
  t.same(shape.body.errors, { date_to: ['The date to does not match the format Y-m-d.'] });

  const theirs = await list('', stranger.token);
  t.same([theirs.status, theirs.body.total, theirs.body.data], [200, 0, []], "another owner's entries are never shown");
  t.equal((await api.request('GET', '/user/transactions')).status, 401);
});
