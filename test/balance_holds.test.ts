/**
 * One balance shared by server processes on one database, through the holds live calls take on it:
 * 1. two processes each run a call of one owner whose balance pays for a minute of one call: each
 *    call holds half, a third call is refused meanwhile, both are told goodbye within what they
 *    hold, together they cost no more than the balance and are charged in full, and their holds go
 *    with their charges. (Each process alone, counting the whole balance, would let both talk for
 *    most of a minute: nearly twice the balance.)
 * 2. a widget message on one process is refused (402, nothing charged) while a call on another
 *    holds what it would cost, and so is a new widget conversation; once the call ends, the
 *    message is charged.
 * 3. a top-up during a call lets its hold be renewed: the call talks on past what the first balance
 *    paid for, and is charged in full.
 * 4. a process killed (SIGKILL) with a live call leaves its hold: it keeps a message on another
 *    process from what it holds until it lapses, and the other process's sweep settles the call
 *    and releases its hold.
 * 5. a renewal shares what an owner has not reserved among one process's calls in call order,
 *    counts the unexpired holds of other calls only, never lowers a hold, and pushes every expiry on.
 * The calls run on each process's manual clock, stepped by the test's phones.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { renewHolds } from '../runtime/ledger/holds.js';
import { callCosts, callRate } from '../runtime/prices.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { ADMIN_TOKEN, startTestPlatform } from './helpers/platform.js';
import { startServer, until } from './helpers/server_process.js';
import { callIn, endedCall, voiceSetup, type VoiceSetup } from './helpers/voice.js';

/** A pipeline call on a US number, as `voiceSetup`'s are. */
const RATE = callRate('pipeline', { type: 'normal', country: 'US' });
const cost = (seconds: number) => callCosts(RATE, seconds * 1000).total;
const round = (value: number) => Math.round(value * 1e6) / 1e6;

/** Another process on the setup's database, with a manual clock of its own, serving the same owner, number and assistant. */
async function secondProcess(t: Test, s: VoiceSetup): Promise<VoiceSetup> {
  const clock = new ManualClock(s.clock.now());
  const scripts = new Map<number, string[]>();
  const api = await startTestPlatform(t, { databaseUrl: s.api.databaseUrl, acceptUnsignedCarrierWebhooks: true }, { clock, speech: { transcripts: (callId, n) => scripts.get(callId)?.[n - 1] } });
  return { ...s, api, clock, scripts };
}

const balance = async (s: VoiceSetup) => Number((await s.api.request('GET', '/user', { token: s.token })).body.data.balance);

/** Adjusts the owner's balance to exactly `amount`. */
async function setBalance(s: VoiceSetup, amount: number): Promise<void> {
  await s.api.request('POST', `/admin/users/${s.userId}/balance`, { token: ADMIN_TOKEN, body: { amount: round(amount - (await balance(s))), reason: 'test' } });
}

/** Each hold, by call id. */
const holds = (databaseUrl: string) =>
  withClient(databaseUrl, async (db) => new Map((await db.query('SELECT call_id, amount::float8 AS amount FROM balance_holds ORDER BY call_id')).rows.map((r: { call_id: string; amount: number }) => [Number(r.call_id), r.amount])));

/** Twilio's webhook for a call that is to be refused: the TwiML it answers. */
async function refusedCall(s: VoiceSetup): Promise<string> {
  const form = new URLSearchParams({ To: s.number, From: '+14155550188', CallSid: `CArefused${Date.now()}` });
  return String((await s.api.request('POST', '/telephony/twilio/inbound', { raw: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } })).body);
}

const INSUFFICIENT = { status: false, error: 'Insufficient balance. Please top up your account.' };

t.test('calls of one owner on two processes together spend no more than the balance', async (t) => {
  const one = await voiceSetup(t);
  const two = await secondProcess(t, one);
  const start = cost(60);
  await setBalance(one, start);
  const a = await callIn(one);
  const b = await callIn(two);
  t.same([...(await holds(one.api.databaseUrl)).values()], [cost(30), round(start - cost(30))], 'each call holds half: its goodbye and 30 s of talk');
  t.match(await refusedCall(one), /<Say>This assistant is not available right now\./, 'a third call finds nothing left to hold and is refused');

  // Each process's clock moves with its own phone, one 20 ms frame at a time.
  for (let ms = 0; ms < 90_000 && !(a.phone.closed && b.phone.closed); ms += 20) {
    await a.phone.step();
    await b.phone.step();
  }
  const calls = [await endedCall(one, a.callId), await endedCall(two, b.callId)];
  const spent = round(calls[0]!.total_cost + calls[1]!.total_cost);
  for (const call of calls) {
    t.equal(call.status, 'ended_by_assistant', `call ${call.id} was ended with a goodbye`);
    t.match(call.transcript, /assistant: Thank you for calling\. Goodbye\.$/);
    t.ok(call.total_cost <= cost(30), `call ${call.id} cost ${call.total_cost}, within its hold of ${cost(30)} (${call.duration} s)`);
    t.ok(call.duration >= 15, `and used most of it: ${call.duration} s`);
  }
  t.ok(spent <= start, `together they cost ${spent}, within the balance of ${start}`);
  t.equal(round(start - (await balance(one))), spent, 'and were charged in full');
  t.same([...(await holds(one.api.databaseUrl)).keys()], [], 'their holds went with their charges');
});

t.test('a message cannot spend what a live call on another process holds', async (t) => {
  const one = await voiceSetup(t);
  const two = await secondProcess(t, one);
  await setBalance(one, cost(30) + 0.008);
  const conversation = await two.api.request('POST', '/conversations', { body: { assistant_id: one.assistantUuid } });
  t.equal(conversation.status, 200, 'a widget conversation while nothing is held');
  const say = () => two.api.request('POST', `/conversations/${conversation.body.conversation_id}/messages`, { body: { message: 'Hello' } });

  const { phone, callId } = await callIn(one);
  await phone.silence(3_000);
  const refused = await say();
  t.same([refused.status, refused.body], [402, INSUFFICIENT], 'the call holds all but 0.008: a 0.01 message is refused');
  const another = await two.api.request('POST', '/conversations', { body: { assistant_id: one.assistantUuid } });
  t.same([another.status, another.body], [402, INSUFFICIENT], 'and so is a new widget conversation');
  t.equal(await balance(one), round(cost(30) + 0.008), 'nothing charged');

  phone.phone.hangUp();
  const call = await endedCall(one, callId);
  const accepted = await say();
  t.equal(accepted.status, 200, 'once the call has ended and its hold gone, the message is answered');
  t.equal(await balance(one), round(cost(30) + 0.008 - call.total_cost - 0.01), 'and charged, after the call');
});

t.test('a top-up during a call lets its hold be renewed: it talks on past what the first balance paid for', async (t) => {
  const s = await voiceSetup(t);
  const first = cost(32);
  await setBalance(s, first);
  const { phone, callId } = await callIn(s);
  await phone.silence(5_000);
  await s.api.credit(s.userId, 1);
  // The holds are renewed every 5 s: by 20 s (before the first balance would have had it say goodbye), past the first balance.
  let talked = 5;
  while (((await holds(s.api.databaseUrl)).get(callId) ?? 0) <= first) {
    if (talked >= 20) return void t.fail('the hold was not raised after the top-up');
    await phone.silence(1_000);
    talked++;
  }
  await phone.silence((60 - talked) * 1000);
  t.notOk(phone.closed, 'still talking after a minute');
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_customer', 'ended by the caller, not the meter');
  t.ok(call.total_cost > first, `cost ${call.total_cost}, more than the ${first} the call started with`);
  t.equal(await balance(s), round(first + 1 - call.total_cost), 'charged in full');
});

t.test("a killed process's hold keeps others from what it holds until it lapses; the sweep that settles its call releases it", async (t) => {
  const databaseUrl = await freshDatabase();
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-holds-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const doomed = await startServer(t, { dataDir, env: { DATABASE_URL: databaseUrl, ADMIN_TOKEN, OUTBOUND_ALLOW_PRIVATE: 'true' } });
  // Sweeps only when the test asks (its clock never moves); a call unvouched for 1 s is taken for left.
  const survivor = await startTestPlatform(t, { databaseUrl, callPresence: { heartbeatMs: 200, orphanAfterMs: 1_000, sweepMs: 60_000 } }, { clock: new ManualClock() });

  const owner = await survivor.user();
  await survivor.credit(owner.id, 25);
  const number = await survivor.phoneNumber(owner.token);
  const assistant = await survivor.assistant(owner.token, { type: 'outbound', phone_number_id: number.id, initial_message: 'Hello.', llm_model_id: 6 });
  const funds = async () => Number((await survivor.request('GET', '/user', { token: owner.token })).body.data.balance);
  await survivor.request('POST', `/admin/users/${owner.id}/balance`, { token: ADMIN_TOKEN, body: { amount: round(cost(30) + 0.008 - (await funds())), reason: 'test' } });
  const conversation = (await survivor.request('POST', '/conversations', { body: { assistant_id: assistant.uuid } })).body.conversation_id as string;
  const say = () => survivor.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'Hello' } });

  const placed = await doomed.api<{ data: { id: number } }>('POST', '/user/calls', { assistant_id: assistant.id, phone_number: '+14155550200' }, owner.token);
  const callId = placed.body.data.id;
  await until('the call to be answered', async () => ((await survivor.request('GET', `/user/calls/${callId}`, { token: owner.token })).body.data.status === 'in-progress' ? true : undefined));
  process.kill(doomed.pid, 'SIGKILL');
  await doomed.exited;

  t.ok(((await holds(databaseUrl)).get(callId) ?? 0) >= cost(30), 'the killed process left its call\'s hold');
  t.same((await say()).body, INSUFFICIENT, 'which keeps a message on another process from what it holds');
  // As if its expiry (35 s after the last renewal) had passed.
  await withClient(databaseUrl, (db) => db.query("UPDATE balance_holds SET expires_at = now() - interval '1 second' WHERE call_id = $1", [callId]));
  t.equal((await say()).status, 200, 'until it lapses');

  const voice = survivor.platform.runtime.services.voice;
  await until('the sweep to settle the call', async () => ((await voice.settleOrphans()).includes(callId) ? true : undefined));
  const call = (await survivor.request('GET', `/user/calls/${callId}`, { token: owner.token })).body.data;
  t.equal(call.status, 'ended', 'the sweep ended the call');
  t.ok(call.total_cost > 0, `and charged it (${call.total_cost})`);
  t.same([...(await holds(databaseUrl)).keys()], [], 'and released its hold');
  t.equal(await funds(), round(cost(30) + 0.008 - 0.01 - call.total_cost), 'the ledger took the message and the call');
});

t.test('a renewal shares what is not reserved among the calls in call order and never lowers a hold', async (t) => {
  const databaseUrl = await freshDatabase();
  const [rich, poor, c1, c2, c3, other, lapsed, unheld, poorCall] = await withClient(databaseUrl, async (db) => {
    const user = async (name: string, funds: number) => {
      const id = Number((await db.query("INSERT INTO users (name, email, password_hash) VALUES ($1, $1 || '@example.com', 'x') RETURNING id", [name])).rows[0].id);
      await db.query("INSERT INTO ledger_entries (user_id, amount, balance_after, kind) VALUES ($1, $2, 0, 'admin_credit')", [id, funds]);
      return id;
    };
    const call = async (userId: number, held?: number, expires = "now() + interval '30 seconds'") => {
      const id = Number((await db.query("INSERT INTO calls (user_id, assistant_name, type, mode, status) VALUES ($1, 'Bot', 'web', 'pipeline', 'in-progress') RETURNING id", [userId])).rows[0].id);
      if (held !== undefined) await db.query(`INSERT INTO balance_holds (call_id, user_id, amount, expires_at) VALUES ($1, $2, $3, ${expires})`, [id, userId, held]);
      return id;
    };
    const a = await user('rich', 1);
    const b = await user('poor', 0.05);
    return [a, b, await call(a, 0.1), await call(a, 0.1), await call(a, 0.2), await call(a, 0.3), await call(a, 0.5, "now() - interval '1 second'"), await call(a), await call(b, 0)];
  });
  const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  // Expiries as epoch seconds, and the database's clock around the renewal: a loaded machine may
  // take more than a second between statements, so the renewed expiries are bounded, not rounded.
  const expiries = () =>
    withClient(databaseUrl, async (db) => new Map((await db.query('SELECT call_id, extract(epoch FROM expires_at)::float8 AS at FROM balance_holds')).rows.map((r: { call_id: string; at: number }) => [Number(r.call_id), r.at])));
  const clock = () => withClient(databaseUrl, async (db) => Number((await db.query('SELECT extract(epoch FROM clock_timestamp())::float8 AS now')).rows[0].now));
  const before = await expiries();
  const renewalStarted = await clock();
  const renewed = await renewHolds(
    pool,
    [
      { callId: c1, userId: rich, target: 0.25 },
      { callId: c2, userId: rich, target: 0.3 },
      { callId: c3, userId: rich, target: 0.1 },
      { callId: unheld, userId: rich, target: 0.1 },
      { callId: poorCall, userId: poor, target: 0.1 },
    ],
    35,
  );
  // 1 less the other call's 0.3 (the lapsed 0.5 does not count) less these calls' 0.4: 0.3 to share.
  t.same(Object.fromEntries(renewed), { [c1]: 0.25, [c2]: 0.25, [c3]: 0.2, [poorCall]: 0.05 }, 'c1 raised in full, c2 by what was left, c3 not lowered, the poor owner up to their balance, no hold made for a call without one');
  const renewalEnded = await clock();
  const after = await expiries();
  t.same([...after.keys()].sort((a, b) => a - b), [c1, c2, c3, other, lapsed, poorCall], 'a hold for each call that had one, and the poor call');
  for (const id of [c1, c2, c3, poorCall]) {
    const at = after.get(id)!;
    t.ok(at >= renewalStarted + 35 - 0.001 && at <= renewalEnded + 35 + 0.001, `call ${id}'s renewed hold expires 35 s after the renewal`);
  }
  t.same([after.get(other), after.get(lapsed)], [before.get(other), before.get(lapsed)], "others' are left as they were");
});
