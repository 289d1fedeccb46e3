/**
 * Post-call webhooks through the outbox (the call rows are written with SQL here, as the voice
 * engine will write them, and queued with `enqueueCallEnded` in the call-ending transaction):
 * 1. a delivery carries webhook-id, webhook-timestamp (the platform's clock at the attempt) and
 *    X-Webhook-Attempt; after a 500 it waits for its retry delay, then the poll (on the platform's
 *    clock) retries it with the same id and body, and it is delivered; the call's webhook_response
 *    keeps the last status and body. (Signatures: webhooks_standard.test.ts.)
 * 2. a receiver that keeps failing is given up after the last attempt (status failed).
 * 3. restricted to completed calls: nothing is queued for a failed or unanswered call; nothing
 *    without an active webhook.
 * 4. disabling the webhook cancels pending deliveries, and one whose attempt is in flight is not
 *    retried; redeliver sends one again.
 * 5. deliveries queued while no server ran are sent by the next one to start.
 * 6. deliveries list filters; other users' deliveries are 404 (secrets and their rotation:
 *    webhooks_standard.test.ts).
 * 7. the recording link is in the payload unless the assistant's include_recording_in_webhook is off.
 * 8. a response with a null character is recorded (replaced); a last attempt whose lease lapsed is
 *    given up; turning the webhook off in an update cancels, a new URL takes the retries.
 * Retries are due at once unless a test says otherwise, and the tests wait for the worker to have
 * attempted every delivery due (`settled`) rather than polling for the outcome.
 */
import t from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { enqueueCallEnded } from '../runtime/webhooks/callEnded.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { startTestPlatform, type TestPlatform } from './helpers/platform.js';
import { startSite } from './helpers/site.js';
import { endCall } from './helpers/webhooks.js';

const site = await startSite(t);
const received: Array<{ headers: Record<string, string | string[] | undefined>; body: string }> = [];
let statuses: number[] = [];
site.route('/hook', (req) => {
  const status = statuses.shift() ?? 200;
  let body = '';
  req.on('data', (chunk: Buffer) => (body += chunk.toString()));
  req.on('end', () => received.push({ headers: req.headers, body }));
  return { status, type: 'text/plain', body: status === 200 ? 'ok' : 'boom' };
});

const options = { outboundAllowPrivate: true, webhookRetryDelaysMs: [0, 0, 0] };

/** The deliveries of `token`'s user (query: `?call_id=...`, `?status=...`) once every one due was attempted. */
async function settledDeliveries(api: TestPlatform, token: string, query = ''): Promise<Array<Record<string, any>>> {
  await api.platform.runtime.settled();
  return (await api.request('GET', `/user/webhook-deliveries${query}`, { token })).body.data;
}

async function owner(api: TestPlatform, webhook = true) {
  const user = await api.user();
  const { id } = await api.assistant(user.token, { name: 'Caller', variables: { plan: 'pro' }, ...(webhook ? { is_webhook_active: true, webhook_url: `${site.origin}/hook` } : {}) });
  return { ...user, assistantId: id };
}

/** Points the assistant's webhook at a receiver that holds its answer until `release()`; `inFlight` settles when a request arrives. */
async function heldReceiver(api: TestPlatform, user: { token: string; assistantId: number }, path: string, status: number) {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let arrived!: () => void;
  const inFlight = new Promise<void>((resolve) => (arrived = resolve));
  site.route(path, () => (arrived(), { status, type: 'text/plain', body: status === 200 ? 'ok' : 'down', heldUntil: held }));
  await api.request('PUT', `/user/assistant/${user.assistantId}`, { token: user.token, body: { webhook_url: `${site.origin}${path}` } });
  return { inFlight, release };
}

t.test('signed delivery with a retry', async (t) => {
  const clock = new ManualClock();
  const api = await startTestPlatform(t, { ...options, webhookRetryDelaysMs: [3_600_000, 3_600_000, 3_600_000] }, { clock });
  const user = await owner(api);
  received.length = 0;
  statuses = [500];
  const { callId, queued } = await endCall(api.databaseUrl, user.id, user.assistantId);
  t.ok(queued);
  api.platform.runtime.wakeWebhooks();
  const [failed] = await settledDeliveries(api, user.token, `?call_id=${callId}`);
  t.match(failed, { status: 'pending', attempts: 1, last_status_code: 500 }, 'not tried again before its delay');
  // The delay passes (the due time is kept in the database's time), and the next poll takes it.
  await withClient(api.databaseUrl, (db) => db.query(`UPDATE webhook_deliveries SET next_attempt_at = now() WHERE call_id = $1`, [callId]));
  clock.advance(1_000);
  const [delivered] = await settledDeliveries(api, user.token, `?call_id=${callId}`);
  t.match(delivered, { status: 'delivered', attempts: 2, last_status_code: 200, event: 'call.ended', url: `${site.origin}/hook` });
  t.equal(received.length, 2);
  const [first, second] = received;
  t.equal(first!.headers['webhook-id'], second!.headers['webhook-id'], 'stable id for de-duplication');
  t.equal(first!.headers['webhook-id'], failed!.delivery_id, 'the id the delivery log shows');
  t.same([first!.headers['x-webhook-attempt'], second!.headers['x-webhook-attempt']], ['1', '2']);
  t.same([first!.headers['webhook-timestamp'], second!.headers['webhook-timestamp']], [String(Math.floor(clock.now() / 1000) - 1), String(Math.floor(clock.now() / 1000))], "each attempt's time by the platform's clock");
  t.equal(first!.body, second!.body, 'the same bytes each time');
  t.same(JSON.parse(second!.body), {
    event: 'call.ended',
    id: callId,
    campaign_id: null,
    campaign_lead_id: null,
    customer_phone: '+4915112345678',
    assistant_phone: '+14155550100',
    duration: 42,
    status: 'completed',
    answered_by: null,
    extracted_variables: { interested: true },
    input_variables: { plan: 'pro', name: 'Ada' },
    transcript: 'assistant: Hi\nuser: Bye',
    recording_url: null,
    created_at: '2026-03-01 10:00:00',
    finished_at: '2026-03-01 10:01:00',
  });
  t.same((await api.request('GET', `/user/calls/${callId}`, { token: user.token })).body.data.webhook_response, { status: 200, body: 'ok' });

  received.length = 0;
  const again = await api.request('POST', `/user/webhook-deliveries/${delivered!.id}/redeliver`, { token: user.token });
  t.equal(again.status, 200);
  await api.platform.runtime.settled();
  t.equal(received.length, 1, 'sent again');
  t.equal(received[0]!.headers['x-webhook-id'], first!.headers['x-webhook-id'], 'redelivery keeps the id');

  const stranger = await api.user();
  t.equal((await api.request('POST', `/user/webhook-deliveries/${delivered!.id}/redeliver`, { token: stranger.token })).status, 404);
  t.same((await api.request('GET', '/user/webhook-deliveries', { token: stranger.token })).body, { data: [] });
});

t.test('give up after the last attempt', async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  statuses = [500, 500, 500, 500];
  const { callId } = await endCall(api.databaseUrl, user.id, user.assistantId);
  api.platform.runtime.wakeWebhooks();
  const [failed] = await settledDeliveries(api, user.token, '?status=failed');
  t.match(failed, { call_id: callId, attempts: 3, last_status_code: 500, last_response: 'boom' });
  t.same((await api.request('GET', `/user/calls/${callId}`, { token: user.token })).body.data.webhook_response, { status: 500, body: 'boom' });
  statuses = [];
});

t.test('the recording link is in the payload only while the assistant includes it', async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  const { callId } = await endCall(api.databaseUrl, user.id, user.assistantId);
  const pool = await createDatabasePool(api.databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  const queuedBody = async () => {
    const rows = await withClient(api.databaseUrl, (db) => db.query(`DELETE FROM webhook_deliveries WHERE call_id = $1 RETURNING body`, [callId]));
    return JSON.parse(rows.rows.at(-1).body) as Record<string, unknown>;
  };
  await queuedBody();
  t.ok(await enqueueCallEnded(pool, callId, 'https://calls.example.com/recordings/1.wav'));
  t.equal((await queuedBody()).recording_url, 'https://calls.example.com/recordings/1.wav', 'included by default');
  await api.request('PUT', `/user/assistant/${user.assistantId}`, { token: user.token, body: { include_recording_in_webhook: false } });
  t.ok(await enqueueCallEnded(pool, callId, 'https://calls.example.com/recordings/1.wav'));
  t.notOk('recording_url' in (await queuedBody()), 'left out when the assistant says so');
});

t.test('what is not queued, and disabling cancels', async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  t.notOk((await endCall(api.databaseUrl, user.id, user.assistantId, 'failed', false)).queued, 'failed call');
  t.notOk((await endCall(api.databaseUrl, user.id, user.assistantId, 'no-answer', false)).queued, 'unanswered call');
  t.notOk((await endCall(api.databaseUrl, user.id, user.assistantId, 'ended_by_customer', false)).queued, 'ended but never answered');
  const quiet = await owner(api, false);
  t.notOk((await endCall(api.databaseUrl, quiet.id, quiet.assistantId)).queued, 'no webhook configured');

  await api.request('PUT', `/user/assistant/${user.assistantId}`, { token: user.token, body: { send_webhook_only_on_completed: false } });
  t.ok((await endCall(api.databaseUrl, user.id, user.assistantId, 'failed', false)).queued, 'every call when not restricted');
  api.platform.runtime.wakeWebhooks();
  t.equal((await settledDeliveries(api, user.token, '?status=delivered')).length, 1, 'delivered');
  // A delivery waiting for its next attempt, as after a failure with the real back-off.
  await withClient(api.databaseUrl, (db) =>
    db.query(`INSERT INTO webhook_deliveries (user_id, assistant_id, event, url, body, next_attempt_at) VALUES ($1, $2, 'call.ended', 'http://127.0.0.1:9/', '{}', now() + interval '1 hour')`, [user.id, user.assistantId]),
  );
  await api.request('POST', '/user/assistants/disable-webhook', { token: user.token, body: { assistant_id: user.assistantId } });
  const statusesAfter = (await api.request('GET', '/user/webhook-deliveries', { token: user.token })).body.data.map((d: { status: string }) => d.status).sort();
  t.same(statusesAfter, ['cancelled', 'delivered'], 'the pending delivery was cancelled, the sent one kept');
});

t.test('disabling during an attempt: the delivery is not retried', async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  const { inFlight, release } = await heldReceiver(api, user, '/held', 500);
  t.ok((await endCall(api.databaseUrl, user.id, user.assistantId)).queued);
  api.platform.runtime.wakeWebhooks();
  await inFlight;
  const disabled = await api.request('POST', '/user/assistants/disable-webhook', { token: user.token, body: { assistant_id: user.assistantId } });
  t.equal(disabled.status, 200);
  release();
  const [settled] = await settledDeliveries(api, user.token);
  t.match(settled, { status: 'cancelled', attempts: 1, last_status_code: 500 }, 'the failed attempt is recorded and nothing more is tried');
});

t.test('a delivery removed during its attempt: the worker carries on with the next', async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  const { inFlight, release } = await heldReceiver(api, user, '/gone', 200);
  await endCall(api.databaseUrl, user.id, user.assistantId);
  api.platform.runtime.wakeWebhooks();
  await inFlight;
  await withClient(api.databaseUrl, (db) => db.query('DELETE FROM webhook_deliveries WHERE user_id = $1', [user.id]));
  release();
  await api.request('PUT', `/user/assistant/${user.assistantId}`, { token: user.token, body: { webhook_url: `${site.origin}/hook` } });
  const { callId } = await endCall(api.databaseUrl, user.id, user.assistantId);
  api.platform.runtime.wakeWebhooks();
  const [next] = await settledDeliveries(api, user.token, `?call_id=${callId}`);
  t.match(next, { status: 'delivered' }, 'the next delivery goes out');
});

t.test('deliveries queued with no server running are sent by the next one', async (t) => {
  const databaseUrl = await freshDatabase();
  const first = await startTestPlatform(t, { ...options, databaseUrl });
  const user = await owner(first);
  await first.platform.close();
  received.length = 0;
  const { callId } = await endCall(databaseUrl, user.id, user.assistantId);
  const second = await startTestPlatform(t, { ...options, databaseUrl });
  const [delivered] = await settledDeliveries(second, user.token, `?call_id=${callId}`);
  t.match(delivered, { status: 'delivered', attempts: 1 });
  t.equal(received.length, 1);
});

t.test('a receiver answering with a null character: the delivery is recorded, not sent again and again', async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  site.route('/nul', () => ({ status: 200, type: 'text/plain', body: 'ok\u0000' }));
  await api.request('PUT', `/user/assistant/${user.assistantId}`, { token: user.token, body: { webhook_url: `${site.origin}/nul` } });
  const { callId } = await endCall(api.databaseUrl, user.id, user.assistantId);
  api.platform.runtime.wakeWebhooks();
  const [delivered] = await settledDeliveries(api, user.token, `?call_id=${callId}`);
  t.match(delivered, { status: 'delivered', attempts: 1, last_status_code: 200, last_response: 'ok\uFFFD' });
  t.same((await api.request('GET', `/user/calls/${callId}`, { token: user.token })).body.data.webhook_response, { status: 200, body: 'ok\uFFFD' });
});

t.test("a last attempt whose lease ran out unrecorded is given up, not tried once more", async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  received.length = 0;
  const id = await withClient(api.databaseUrl, async (db) =>
    Number((await db.query(
      `INSERT INTO webhook_deliveries (user_id, assistant_id, event, url, body, status, attempts, lease_expires_at)
       VALUES ($1, $2, 'call.ended', $3, '{}', 'delivering', 3, now() - interval '1 second') RETURNING id`,
      [user.id, user.assistantId, `${site.origin}/hook`],
    )).rows[0].id),
  );
  api.platform.runtime.wakeWebhooks();
  const failed = (await settledDeliveries(api, user.token, '?status=failed')).find((d) => d.id === id);
  t.match(failed, { attempts: 3, status: 'failed', last_error: 'The last attempt was never recorded (its worker stopped)' });
  t.equal(received.length, 0, 'nothing was sent');
});

t.test('turning the webhook off in an update cancels what waits; a new URL takes the retries', async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  const waiting = async (url: string) =>
    withClient(api.databaseUrl, async (db) =>
      Number((await db.query(
        `INSERT INTO webhook_deliveries (user_id, assistant_id, event, url, body, next_attempt_at) VALUES ($1, $2, 'call.ended', $3, '{}', now() + interval '1 hour') RETURNING id`,
        [user.id, user.assistantId, url],
      )).rows[0].id),
    );
  const deliveries = async () => (await api.request('GET', '/user/webhook-deliveries', { token: user.token })).body.data as Array<{ id: number; status: string; url: string }>;
  const first = await waiting(`${site.origin}/hook`);
  await api.request('PUT', `/user/assistant/${user.assistantId}`, { token: user.token, body: { webhook_url: `${site.origin}/moved` } });
  t.match((await deliveries()).find((d) => d.id === first), { status: 'pending', url: `${site.origin}/moved` }, 'retargeted');
  await api.request('PUT', `/user/assistant/${user.assistantId}`, { token: user.token, body: { name: 'Renamed' } });
  t.match((await deliveries()).find((d) => d.id === first), { status: 'pending' }, 'other changes leave it waiting');
  await api.request('PUT', `/user/assistant/${user.assistantId}`, { token: user.token, body: { is_webhook_active: false } });
  t.match((await deliveries()).find((d) => d.id === first), { status: 'cancelled' }, 'cancelled with the webhook turned off');
});

t.test("one user's hanging receiver does not hold up another user's deliveries", async (t) => {
  // The worker is not idle while the hanging receiver holds a loop: the attempt's log line says when the other is delivered.
  let delivered!: () => void;
  const deliveredOnce = new Promise<void>((resolve) => (delivered = resolve));
  const api = await startTestPlatform(t, options, {}, (line) => line.msg === 'webhook attempt' && line.outcome === 'delivered' && delivered());
  const slow = await owner(api);
  const { inFlight, release } = await heldReceiver(api, slow, '/hanging', 200);
  t.teardown(release);
  // More of its deliveries due than the worker has loops.
  for (let i = 0; i < 5; i++) await endCall(api.databaseUrl, slow.id, slow.assistantId);
  api.platform.runtime.wakeWebhooks();
  await inFlight;
  const quick = await owner(api);
  const { callId } = await endCall(api.databaseUrl, quick.id, quick.assistantId);
  api.platform.runtime.wakeWebhooks();
  await deliveredOnce;
  const [delivery] = (await api.request('GET', `/user/webhook-deliveries?call_id=${callId}`, { token: quick.token })).body.data;
  t.match(delivery, { status: 'delivered', attempts: 1 }, 'delivered while the other receiver still holds its request');
  const slowStatuses = (await api.request('GET', '/user/webhook-deliveries', { token: slow.token })).body.data.map((d: { status: string }) => d.status).sort();
  t.same(slowStatuses, ['delivering', 'pending', 'pending', 'pending', 'pending'], 'one attempt at a time for the hanging receiver');
});
