import t from 'tap';
import { startFakeOpenAi } from './fakes/openai.js';
import { claimJob, completeJob, failJob, releaseJob, renewLease, retryJob } from '../runtime/knowledge/jobs.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { until } from './helpers/server_process.js';
import { html, startSite } from './helpers/site.js';
import { callIn, voiceSetup } from './helpers/voice.js';

/**
 * A stop as the platform sees it from outside, in process (the real server, stopped by signals,
 * is in stop_and_restart.test.ts):
 * 1. While a call is live the stop waits: REST answers 503 with Retry-After in each body family,
 *    health says `stopping`, an inbound call hears a polite refusal, outbound and web calls and
 *    new conversations are 503, while the live call's status callback is still served.
 * 2. The stop goes on as soon as the last call ends by itself, long before the grace is over;
 *    the call's end is saved whole.
 * 3. A call still live when the grace ends hears a goodbye and is saved `ended`, charged.
 * 4. A reply under way is answered within the grace; one still being written after it is cut
 *    short (503) and its message refunded: no message is left charged without a reply or refund.
 * 5. A document job still running at the stop is given back (due at once, its run not counted)
 *    and the next start runs it; the given-back run, if it still ends, touches nothing of the
 *    job's next claim.
 * 6. A call whose start was under way when the stop ended the live calls is ended as it arrives
 *    and the caller refused; the stop does not wait for it.
 * 7. A live call that a sweep elsewhere ended is ended here at the next heartbeat, its end not
 *    written over the sweep's.
 */

const form = (fields: Record<string, string>) => ({ raw: new URLSearchParams(fields).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });

t.test('while a stop waits for a live call, new work is refused and the call goes on; its end lets the stop go on', async (t) => {
  const s = await voiceSetup(t);
  const { callId, phone } = await callIn(s, ['Is anyone there?']);
  await phone.untilAgentDone();
  const started = Date.now();
  const closing = s.api.platform.close({ graceMs: 60_000 });

  const rest = await s.api.request('GET', '/user', { token: s.token });
  t.equal(rest.status, 503, 'REST: 503');
  t.equal(rest.headers.get('retry-after'), '5', 'with Retry-After');
  t.same(rest.body, { message: 'The server is restarting. Please try again in a moment.' });
  t.match((await s.api.request('GET', '/user/knowledgebases', { token: s.token })).body, { error: 'The server is restarting. Please try again in a moment.' }, 'in the route\'s own body family');
  t.match(await s.api.request('POST', '/conversations', { body: { assistant_id: s.assistantUuid } }), { status: 503, body: { status: false, error: /restarting/ } }, 'no new conversation');
  t.match(await s.api.request('GET', '//health'), { status: 503, body: { status: 'stopping' } }, 'health says stopping (a load balancer takes the process out)');
  t.match(await s.api.request('POST', '/web-calls', { body: { assistant_id: s.assistantUuid } }), { status: 503 }, 'no new web call');
  t.match(await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+14155550123' } }), { status: 503 }, 'no new outbound call');
  const inbound = await s.api.request('POST', '/telephony/twilio/inbound', form({ To: s.number, From: '+14155550111', CallSid: 'CAstopping' }));
  t.equal(inbound.status, 200, 'an inbound call is answered');
  t.match(String(inbound.body), /<Say>Sorry, this assistant cannot take your call right now\. Please call again in a few minutes\. Goodbye\.<\/Say>\s*<Hangup\/>/, 'with a polite refusal');
  const status = await s.api.request('POST', `/telephony/twilio/status?call_id=${callId}`, form({ CallSid: 'CAnone', CallStatus: 'ringing' }));
  t.equal(status.status, 200, 'the live call\'s status callbacks are still served');

  await phone.turn();
  await phone.untilAgentDone();
  t.ok(s.api.platform.runtime.services.voice.session(callId)?.live, 'the live call went on: the caller was answered');
  phone.phone.hangUp();
  await closing;
  t.ok(Date.now() - started < 30_000, `the stop went on once the call ended (${Date.now() - started} ms, grace 60 s)`);
  const { rows } = await withClient(s.api.databaseUrl, (db) => db.query(`SELECT status, transcript FROM calls WHERE id = $1`, [callId]));
  t.match(rows[0], { status: 'ended_by_customer', transcript: /user: Is anyone there\?/ }, 'the call\'s end was saved whole before the stop ended');
});

t.test('a call still live when the grace ends hears a goodbye, and its end is saved and charged before the stop ends', async (t) => {
  const s = await voiceSetup(t);
  const voice = s.api.platform.runtime.services.voice;
  const { callId, phone } = await callIn(s);
  await phone.untilAgentDone();
  const closing = s.api.platform.close({ graceMs: 0 });
  // The goodbye plays on the manual clock as the phone moves it.
  await phone.until(() => phone.closed, 20_000, 'the goodbye and the hang-up');
  await closing;
  const { rows } = await withClient(s.api.databaseUrl, (db) =>
    db.query(`SELECT c.status, c.duration, c.transcript, c.total_cost::float8 AS total_cost, (SELECT count(*)::int FROM ledger_entries l WHERE l.kind = 'call' AND l.reference = c.id::text) AS charges FROM calls c WHERE c.id = $1`, [callId]),
  );
  t.match(rows[0], { status: 'ended', charges: 1 }, 'ended and charged once');
  t.ok(rows[0].duration > 0 && rows[0].total_cost > 0, 'with its duration and cost');
  t.match(rows[0].transcript, /assistant: Hello, this is Bot\.\nassistant: Thank you for calling\. Goodbye\.$/, 'the goodbye is in the transcript');
  t.equal(voice.liveCount(), 0, 'no call is left live');
});

t.test('a reply under way when the stop begins is answered within the grace, or cut short and refunded after it', async (t) => {
  const fake = await startFakeOpenAi(t);
  const api = await startTestPlatform(t, { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } } });
  const user = await api.user();
  await api.credit(user.id, 1);
  const { uuid } = await api.assistant(user.token, { llm_model_id: 1 });
  const conversation = async () => (await api.request('POST', '/conversations', { body: { assistant_id: uuid } })).body.conversation_id as string;
  const [answered, cut] = [await conversation(), await conversation()];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  fake.scriptChat({ text: 'Here is your answer.', heldUntil: released }, { text: 'Never said.', heldUntil: new Promise(() => {}) });
  const first = api.request('POST', `/conversations/${answered}/messages`, { body: { message: 'First question' } });
  await fake.received(1);
  const second = api.request('POST', `/conversations/${cut}/messages`, { body: { message: 'Second question' } });
  await fake.received(2);

  const closing = api.platform.close({ graceMs: 1_000 });
  t.match(await api.request('POST', `/conversations/${answered}/messages`, { body: { message: 'A third' } }), { status: 503 }, 'no new message once the stop has begun');
  release();
  t.match(await first, { status: 200, body: { message: 'Here is your answer.' } }, 'the reply that came within the grace is given');
  t.match(await second, { status: 503, body: { status: false, error: /restarting/ } }, 'the one still being written after it is cut short: 503, try again');
  await closing;

  const rows = await withClient(api.databaseUrl, async (db) =>
    (await db.query(`SELECT kind, amount::float8 AS amount FROM ledger_entries WHERE user_id = $1 AND kind LIKE 'conversation%' ORDER BY id`, [user.id])).rows,
  );
  t.same(rows, [
    { kind: 'conversation_message', amount: -0.01 },
    { kind: 'conversation_message', amount: -0.01 },
    { kind: 'conversation_refund', amount: 0.01 },
  ], 'both messages were charged, the one without a reply refunded');
  const pending = await withClient(api.databaseUrl, async (db) => Number((await db.query(`SELECT count(*) AS n FROM conversation_messages WHERE reply_pending`)).rows[0].n));
  t.equal(pending, 0, 'no message is left owed a reply');
});

t.test('a document job still running at the stop is given back, due at once and not counted, and the next start runs it', async (t) => {
  const site = await startSite(t);
  let hold = true;
  site.route('/manual', () => (hold ? { body: html('Manual', '<p>never sent</p>'), heldUntil: new Promise(() => {}) } : { body: html('Manual', '<p>Support hours are nine to five.</p>') }));
  const api = await startTestPlatform(t, { outboundAllowPrivate: true });
  const user = await api.user();
  const kb = (await api.request('POST', '/user/knowledgebases', { token: user.token, body: { name: 'KB' } })).body.data.id;
  const doc = (await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: user.token, body: { name: 'Manual', type: 'website', url: `${site.origin}/manual` } })).body.data.id;
  await site.requested('/manual');
  await api.platform.close({ graceMs: 0, hurry: Promise.resolve() });
  const job = await withClient(api.databaseUrl, async (db) => (await db.query(`SELECT status, attempts, run_after <= now() AS due FROM document_jobs WHERE document_id = $1`, [doc])).rows[0]);
  t.same(job, { status: 'pending', attempts: 0, due: true }, 'given back: pending, due, its run not counted');

  // The given-back run may still end in the stopping process (its worker threads closed under it):
  // whatever it then records or renews must not touch the job's next claim.
  const pool = await createDatabasePool(api.databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  const old = (await claimJob(pool, 60_000))!;
  await releaseJob(pool, old);
  const again = (await claimJob(pool, 60_000))!;
  t.equal(again.attempts, old.attempts, 'claimed again with the same attempt count');
  await retryJob(pool, old, 'the old run failed', 60_000);
  await failJob(pool, old, 'the old run failed');
  await renewLease(pool, old, 3_600_000);
  t.equal(await completeJob(pool, old), 'superseded', 'the old run\'s outcome is not recorded');
  const row = await withClient(api.databaseUrl, async (db) => (await db.query(`SELECT status, claim::text AS claim, lease_expires_at < now() + interval '2 minutes' AS own_lease, last_error FROM document_jobs WHERE document_id = $1`, [doc])).rows[0]);
  t.same(row, { status: 'running', claim: again.claim, own_lease: true, last_error: null }, 'the new claim is untouched: running, its lease, no error');
  await releaseJob(pool, again);

  hold = false;
  const next = await startTestPlatform(t, { outboundAllowPrivate: true, databaseUrl: api.databaseUrl });
  await next.platform.runtime.settled();
  t.equal((await next.request('GET', `/user/knowledgebases/${kb}/documents/${doc}`, { token: user.token })).body.data.status, 'active', 'the next start ran it');
});

t.test('a call whose start was under way when the stop ended the live calls is ended as it arrives, and refused', async (t) => {
  const s = await voiceSetup(t);
  const voice = s.api.platform.runtime.services.voice;
  // Holding the calls table makes the call's start wait at its insert, past the draining check.
  const holder = new (await import('pg')).default.Client({ connectionString: s.api.databaseUrl });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query('BEGIN');
  await holder.query('LOCK TABLE calls IN ACCESS EXCLUSIVE MODE');
  const answer = voice.inbound('twilio', { to: s.number, from: '+14155550122', carrierCallId: 'CAlate' });
  // PostgreSQL announces no lock wait: its activity view is looked at until the insert waits.
  await until('the insert to wait on the lock', async () => ((await withClient(s.api.databaseUrl, async (db) => Number((await db.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO calls%'`)).rows[0].n))) > 0 ? true : undefined));
  const ending = voice.endAll(0);
  await holder.query('COMMIT');
  t.match(await answer, { kind: 'refuse', text: /^Sorry, this assistant cannot take your call right now/ }, 'the caller hears the refusal, not a stream to a call that is ending');
  await ending;
  t.equal(voice.liveCount(), 0, 'nothing is left live: the stop did not wait out its bound for it');
  const { rows } = await withClient(s.api.databaseUrl, (db) => db.query(`SELECT status FROM calls WHERE carrier_call_id = 'CAlate'`));
  t.same(rows, [{ status: 'failed' }], 'its row is ended, as never answered');
});

t.test('a live call a sweep elsewhere ended (this process could not vouch for it) is ended here at the next heartbeat', async (t) => {
  const lines: Array<Record<string, any>> = [];
  const s = await voiceSetup(t, {}, { logTo: (line) => lines.push(line) });
  const { callId, phone } = await callIn(s);
  await phone.untilAgentDone();
  // What another server's sweep writes: the call ended as of when it was last heard, charged, its heartbeat gone.
  await withClient(s.api.databaseUrl, async (db) => {
    await db.query(`UPDATE calls SET status = 'ended', ended_at = now() WHERE id = $1`, [callId]);
    await db.query(`DELETE FROM call_heartbeats WHERE call_id = $1`, [callId]);
  });
  await phone.silence(1_200);
  // The heartbeat's write has found the call ended; the end here closes the phone's socket.
  await s.clock.settled();
  if (!phone.closed) await new Promise((resolve) => phone.phone.once('close', resolve));
  t.ok(lines.some((l) => l.msg === 'a live call was ended by another server\'s sweep while this one could not vouch for it; ending it here' && l.callId === callId), 'the heartbeat found it ended and said so');
  await s.api.platform.runtime.services.voice.whenEnded(callId);
  t.ok(lines.some((l) => /had already been ended/.test(l.msg) && l.callId === callId), 'its end here was not written over the sweep\'s');
  const { rows } = await withClient(s.api.databaseUrl, (db) => db.query(`SELECT status FROM calls WHERE id = $1`, [callId]));
  t.same(rows, [{ status: 'ended' }]);
});
