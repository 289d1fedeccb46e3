import { sql } from 'slonik';
import t from 'tap';
import { z } from 'zod';
import { chargeCall } from '../runtime/calls/repository.js';
import { callCosts, callRate } from '../runtime/prices.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { Conditions } from './helpers/conditions.js';
import { withClient } from './helpers/database.js';
import { ADMIN_TOKEN } from './helpers/platform.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * Call costs: the price table, per started second; one ledger entry per call; a call that would
 * overrun the balance is ended with a goodbye; no call starts on an empty balance; calls a stopped
 * process left open are ended and charged up to its last heartbeat.
 */

t.test('cost arithmetic: platform per mode plus carrier per number type and country, per started second', async (t) => {
  const us = callRate('pipeline', { type: 'normal', country: 'US' });
  t.same(callCosts(us, 61_200), { seconds: 62, carrier: 0.014467, total: 0.076467 });
  t.same(callCosts(us, 0), { seconds: 0, carrier: 0, total: 0 });
  t.same(callCosts(us, 1), { seconds: 1, carrier: 0.000233, total: 0.001233 });
  t.same(callCosts(callRate('multimodal', null), 30_000), { seconds: 30, carrier: 0, total: 0.06 }, 'web calls have no carrier');
  t.same(callCosts(callRate('dualplex', { type: 'normal', country: 'ZW' }), 60_000), { seconds: 60, carrier: 0.04, total: 0.13 }, 'other countries take the default');
  t.same(callCosts(callRate('pipeline', { type: 'sip', country: 'US' }), 60_000), { seconds: 60, carrier: 0.004, total: 0.064 });
});

const balance = async (s: Awaited<ReturnType<typeof voiceSetup>>) => Number((await s.api.request('GET', '/user', { token: s.token })).body.data.balance);

t.test('an answered call is charged once, in the ledger, with carrier and total cost on the call', async (t) => {
  const s = await voiceSetup(t);
  const before = await balance(s);
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  await phone.silence(10_000);
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  const perSecond = (0.06 + 0.014) / 60;
  const seconds = Math.round(call.total_cost / perSecond);
  t.ok(seconds >= call.duration && seconds <= call.duration + 1, `${seconds} billed seconds for a ${call.duration} s call`);
  t.equal(call.carrier_cost, Math.round((0.014 / 60) * seconds * 1e6) / 1e6);
  t.equal(Math.round((before - (await balance(s))) * 1e6) / 1e6, call.total_cost, 'the balance went down by the total cost');
  const { withClient } = await import('./helpers/database.js');
  const entries = await withClient(s.api.databaseUrl, (db) => db.query("SELECT amount::float8 AS amount, reference FROM ledger_entries WHERE kind = 'call'"));
  t.same(entries.rows, [{ amount: -call.total_cost, reference: String(callId) }], 'one ledger entry for the call');
});

t.test('a second charge for the same call is refused whole: the balance and the ledger stay equal', async (t) => {
  const s = await voiceSetup(t);
  const { callId, phone } = await callIn(s);
  await phone.untilAgentDone();
  phone.phone.hangUp();
  await endedCall(s, callId);
  const before = await balance(s);
  const pool = await createDatabasePool(s.api.databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  await t.rejects(pool.transaction((tx) => chargeCall(tx, s.userId, callId, 0.5)), 'the call was charged when it ended');
  t.equal(await balance(s), before, 'nothing more was taken');
  t.equal(await pool.oneFirst(sql.type(z.object({ sum: z.number() }))`SELECT sum(amount)::float8 AS sum FROM ledger_entries WHERE user_id = ${s.userId}`), before, 'the ledger sums to the balance');
});

t.test('two calls on one balance: when one ends, the other is cut off against what is left after its charge', async (t) => {
  const s = await voiceSetup(t);
  const start = await balance(s);
  await s.api.request('POST', `/admin/users/${s.userId}/balance`, { token: ADMIN_TOKEN, body: { amount: -(start - 0.06), reason: 'test' } });
  const a = await callIn(s);
  const b = await callIn(s);
  // One clock for both calls: each 20 ms step of one phone, the other sends its frame too.
  for (let ms = 0; ms < 10_000; ms += 20) {
    b.phone.phone.speak();
    await a.phone.step();
  }
  a.phone.phone.hangUp();
  const first = await endedCall(s, a.callId);
  await b.phone.until(() => b.phone.closed, 60_000, 'the cut-off of the second call');
  const second = await endedCall(s, b.callId);
  t.equal(second.status, 'ended_by_assistant', 'the second call was ended with a goodbye');
  const rate = 0.06 / 60 + 0.014 / 60;
  t.ok(second.total_cost <= 0.06 - first.total_cost + 1e-6, `the second call cost ${second.total_cost}, within the ${(0.06 - first.total_cost).toFixed(6)} left after the first`);
  t.ok(second.duration < (0.06 - first.total_cost) / rate, `ended after ${second.duration} s`);
  const left = await balance(s);
  t.equal(Math.round((0.06 - left) * 1e6) / 1e6, Math.round((first.total_cost + second.total_cost) * 1e6) / 1e6, 'the ledger took both costs in full');
});

t.test('the end of a call is saved again and again until the database takes it, however long it refuses', async (t) => {
  // Attempts 20 and 40 ms apart, then every 60 ms, by the clock: the refusals below outlast the
  // schedule. Each refused attempt is logged as the next is armed; the test then moves the clock.
  let retries = 0;
  const refused = new Conditions();
  const retried = (n: number) => refused.until(() => retries >= n);
  const s = await voiceSetup(t, {}, {
    runtime: { callEndRetryMs: [20, 40, 60] },
    logTo: (line) => {
      if (line.msg !== 'the end of the call could not be saved; trying again') return;
      retries++;
      refused.changed();
    },
  });
  const { phone, callId } = await callIn(s, ['Is anyone there?']);
  await phone.untilAgentDone();
  await phone.turn();
  // Until the test lifts it, writing any call's end fails; the sequence counts the refusals (it is
  // not rolled back with them).
  await withClient(s.api.databaseUrl, (db) =>
    db.query(`CREATE SEQUENCE refused_ends; ALTER TABLE calls ADD CONSTRAINT hold_ends CHECK (CASE WHEN ended_at IS NULL THEN true ELSE nextval('refused_ends') < 0 END) NOT VALID`),
  );
  phone.phone.hangUp();
  const refusals = () => withClient(s.api.databaseUrl, async (db) => Number((await db.query(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS n FROM refused_ends`)).rows[0].n));
  for (const [attempt, delay] of [20, 40, 60, 60, 60].entries()) {
    await retried(attempt + 1);
    s.clock.advance(delay);
  }
  await retried(6);
  t.ok((await refusals()) >= 6, 'six attempts refused, more than the schedule has waits (the save once gave up after them)');
  await withClient(s.api.databaseUrl, (db) => db.query('ALTER TABLE calls DROP CONSTRAINT hold_ends'));
  s.clock.advance(60);
  const call = await endedCall(s, callId);
  t.match(call, { status: 'ended_by_customer', transcript: /user: Is anyone there\?/ }, 'saved whole by a later attempt');
  t.ok(call.total_cost > 0, 'and charged');
});

t.test('calls a stopped process left open are ended and charged up to when they were last heard (else last vouched for)', async (t) => {
  const s = await voiceSetup(t);
  const voice = s.api.platform.runtime.services.voice;
  const { callId: liveId, phone } = await callIn(s);
  await phone.untilAgentDone();
  const leftOpen = (fields: string) =>
    withClient(s.api.databaseUrl, async (db) =>
      Number((await db.query(
        `INSERT INTO calls (user_id, assistant_id, assistant_name, type, mode, status, client_phone_number, assistant_phone_number, answered_at, created_at, updated_at)
         VALUES ($1, $2, 'Bot', 'inbound', 'pipeline', ${fields}) RETURNING id`,
        [s.userId, s.assistantId, '+14155550199', s.number],
      )).rows[0].id),
    );
  const answered = await leftOpen(`'in-progress', $3, $4, now() - interval '20 minutes', now() - interval '21 minutes', now() - interval '16 minutes'`);
  const unanswered = await leftOpen(`'ringing', $3, $4, NULL, now() - interval '10 minutes', now() - interval '10 minutes'`);
  const recent = await leftOpen(`'in-progress', $3, $4, now() - interval '3 minutes', now() - interval '3 minutes', now() - interval '10 seconds'`);
  // Vouched for by its process's heartbeat until 2 minutes ago; last heard 3 minutes after its answer.
  const heard = await leftOpen(`'in-progress', $3, $4, now() - interval '10 minutes', now() - interval '10 minutes', now() - interval '10 minutes'`);
  await withClient(s.api.databaseUrl, (db) => db.query(`INSERT INTO call_heartbeats (call_id, seen_at, heard_at) SELECT id, now() - interval '2 minutes', answered_at + interval '3 minutes' FROM calls WHERE id = $1`, [heard]));
  await withClient(s.api.databaseUrl, (db) => db.query(`UPDATE calls SET updated_at = now() - interval '1 hour' WHERE id = $1`, [liveId]));
  const before = await balance(s);

  t.same(await voice.settleOrphans(), [], 'seen silent once: not yet (its process may be back from an outage and about to vouch for it)');
  t.same([...(await voice.settleOrphans())].sort((a, b) => a - b), [answered, unanswered, heard], 'silent at two sweeps: the silent ones, not one still vouched for, nor this process\'s own');
  const read = async (id: number) => (await s.api.request('GET', `/user/calls/${id}`, { token: s.token })).body.data;
  const expected = callCosts(callRate('pipeline', { type: 'normal', country: 'US' }), 4 * 60_000);
  t.match(await read(answered), { status: 'ended', duration: 240, total_cost: expected.total, carrier_cost: expected.carrier }, 'charged for the four minutes up to the last sign of life');
  t.match(await read(unanswered), { status: 'failed', duration: 0, total_cost: 0 });
  t.match(await read(recent), { status: 'in-progress' });
  const heardCosts = callCosts(callRate('pipeline', { type: 'normal', country: 'US' }), 3 * 60_000);
  t.match(await read(heard), { status: 'ended', duration: 180, total_cost: heardCosts.total }, 'charged up to when it was last heard, not its last heartbeat');
  t.equal(Math.round((before - (await balance(s))) * 1e6) / 1e6, Math.round((expected.total + heardCosts.total) * 1e6) / 1e6, 'the ledger took exactly that');
  t.equal(await withClient(s.api.databaseUrl, async (db) => Number((await db.query('SELECT count(*) AS n FROM call_heartbeats WHERE call_id = $1', [heard])).rows[0].n)), 0, 'its heartbeat went with its end');
  t.same(await voice.settleOrphans(), [], 'once');

  // Vouched for between two sweeps (its process back after an outage): the count starts again.
  const lastSeen = (seconds: number) => withClient(s.api.databaseUrl, (db) => db.query(`UPDATE calls SET updated_at = now() - make_interval(secs => $2) WHERE id = $1`, [recent, seconds]));
  await lastSeen(50);
  t.same(await voice.settleOrphans(), [], 'silent, seen once');
  await lastSeen(40);
  t.same(await voice.settleOrphans(), [], 'silent again, but touched since the last sweep');
  t.same(await voice.settleOrphans(), [recent], 'then silent at two sweeps in a row');

  // As simulated time passes, the process's heartbeat vouches for the live call and says when it was last heard.
  const beat = () => withClient(s.api.databaseUrl, async (db) => (await db.query(`SELECT extract(epoch FROM now() - seen_at) AS age, (extract(epoch FROM heard_at) * 1000)::float8 AS heard FROM call_heartbeats WHERE call_id = $1`, [liveId])).rows[0] as { age: number; heard: number } | undefined);
  await phone.silence(3_000);
  let row = await beat();
  for (let i = 0; i < 200 && !(row && row.heard >= s.clock.now() - 1_000); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    row = await beat();
  }
  t.ok(row && row.age < 10, 'the heartbeat vouched for the live call');
  t.ok(row && row.heard >= s.clock.now() - 1_000, 'and said it was heard within its last second');
  phone.phone.hangUp();
  t.match(await endedCall(s, liveId), { status: 'ended_by_customer' });
});

t.test('balance cut-off: the agent says goodbye before the balance runs out', async (t) => {
  const s = await voiceSetup(t);
  const start = await balance(s);
  await s.api.request('POST', `/admin/users/${s.userId}/balance`, { token: ADMIN_TOKEN, body: { amount: -(start - 0.04), reason: 'test' } });
  t.equal(await balance(s), 0.04);
  const { phone, callId } = await callIn(s);
  await phone.until(() => phone.closed, 40_000, 'the cut-off');
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_assistant');
  t.match(call.transcript, /assistant: Thank you for calling\. Goodbye\.$/);
  t.ok(call.duration >= 20 && call.duration <= 32, `ended after ${call.duration} s (0.04 USD lasts 32 s)`);
  const left = await balance(s);
  t.ok(left >= 0, `balance left ${left}`);
  t.equal(Math.round((0.04 - left) * 1e6) / 1e6, call.total_cost);

  await s.api.request('POST', `/admin/users/${s.userId}/balance`, { token: ADMIN_TOKEN, body: { amount: -left, reason: 'empty it' } });
  const refused = await s.api.request('POST', '/telephony/twilio/inbound', { raw: new URLSearchParams({ To: s.number, From: '+14155550199', CallSid: 'CAempty' }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.match(String(refused.body), /<Say>This assistant is not available right now\./);
});
