/**
 * Standard Webhooks, checked by the `standardwebhooks` npm package (a third-party verifier) on
 * deliveries a real HTTP receiver got:
 * 1. a delivery verifies with the secret `GET /user/webhook-secret` shows (`whsec_` + base64 of 32
 *    bytes); a tampered body, timestamp or id fails; a retry after a 500 carries the same
 *    webhook-id and verifies again; the former X-Webhook-Signature is still sent (keyed with the
 *    secret's text) unless WEBHOOK_LEGACY_SIGNATURE is off.
 * 2. rotation: the new secret is returned with the end of the overlap (WEBHOOK_SECRET_OVERLAP_HOURS);
 *    during it a delivery carries two signatures and verifies with the old secret and with the new;
 *    once the overlap is over, with the new one only.
 * 3. a receiver answering 410 Gone: the delivery is not retried and the log says why, the
 *    assistant's webhook is disabled, its waiting deliveries are cancelled (saying why), the next
 *    call queues nothing; setting the webhook URL again re-enables it. A 410 from a URL the
 *    assistant has since left disables nothing.
 * 4. a secret issued before Standard Webhooks (unpadded base64url, used as text) is rewritten by
 *    its migration to standard base64 of the same bytes: deliveries verify with what the secret
 *    route now shows, and the former header with the old text until a rotation.
 */
import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { createLogger } from '../runtime/logger.js';
import { loadMigrations, migrate } from '../runtime/store/migrate.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform, type TestPlatform } from './helpers/platform.js';
import { startSite } from './helpers/site.js';
import { endCall } from './helpers/webhooks.js';

interface Received {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

const site = await startSite(t);
const received: Received[] = [];
/** Status answers per receiver path, in order; 200 once they run out. */
const answers = new Map<string, number[]>();
for (const path of ['/hook', '/gone', '/new-home']) {
  site.route(path, (req) => {
    const status = answers.get(path)?.shift() ?? 200;
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => received.push({ path, headers: plain(req.headers), body }));
    return { status, type: 'text/plain', body: status === 200 ? 'ok' : 'no' };
  });
}

function plain(headers: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, String(value)]));
}

const options = { outboundAllowPrivate: true, webhookRetryDelaysMs: [0, 0, 0] };

async function owner(api: TestPlatform, path = '/hook') {
  const user = await api.user();
  const { id } = await api.assistant(user.token, { name: 'Caller', is_webhook_active: true, webhook_url: `${site.origin}${path}` });
  return { ...user, assistantId: id };
}

/** Ends a call of `user`'s assistant and returns the requests its delivery made, once the worker is done. */
async function deliver(api: TestPlatform, user: { id: number; assistantId: number }): Promise<Received[]> {
  received.length = 0;
  const { queued } = await endCall(api.databaseUrl, user.id, user.assistantId);
  if (!queued) return [];
  api.platform.runtime.wakeWebhooks();
  await api.platform.runtime.settled();
  return [...received];
}

/** Whether the `standardwebhooks` verifier accepts the request with `secret`. */
function verifies(secret: string, request: { headers: Record<string, string>; body: string }): boolean {
  try {
    new Webhook(secret).verify(request.body, request.headers);
    return true;
  } catch {
    return false;
  }
}

const legacyVerifies = (secretText: string, request: Received) =>
  request.headers['x-webhook-signature'] === `v1=${createHmac('sha256', secretText).update(`${request.headers['x-webhook-timestamp']}.${request.body}`).digest('hex')}`;

const secretOf = async (api: TestPlatform, token: string) => (await api.request('GET', '/user/webhook-secret', { token })).body.data;

t.test('deliveries verify with the standardwebhooks package; tampering does not', async (t) => {
  // A clock a minute behind: the timestamp is the platform's, and still within the verifier's 5 minutes.
  const clock = new ManualClock(Date.now() - 60_000);
  const api = await startTestPlatform(t, options, { clock });
  const user = await owner(api);
  answers.set('/hook', [500]);
  const [first, retry] = await deliver(api, user);
  const shown = await secretOf(api, user.token);
  t.match(shown, { secret: /^whsec_[A-Za-z0-9+/]{43}=$/, previous_secret_expires_at: null });
  t.equal(Buffer.from(shown.secret.slice(6), 'base64').length, 32, '32 random bytes');
  t.ok(first && retry, 'a first attempt and its retry');
  t.equal(first!.headers['webhook-timestamp'], String(Math.floor(clock.now() / 1000)), "the platform's clock");
  t.match(first!.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/, 'one signature');
  t.ok(verifies(shown.secret, first!), 'the first attempt verifies');
  t.ok(verifies(shown.secret, retry!), 'the retry verifies');
  t.equal(retry!.headers['webhook-id'], first!.headers['webhook-id'], 'the same webhook-id on the retry');
  t.equal(retry!.body, first!.body);

  const tampered = {
    body: { ...first!, body: first!.body.replace('"duration":42', '"duration":43') },
    timestamp: { ...first!, headers: { ...first!.headers, 'webhook-timestamp': String(Number(first!.headers['webhook-timestamp']) + 1) } },
    id: { ...first!, headers: { ...first!.headers, 'webhook-id': `${first!.headers['webhook-id']}x` } },
  };
  t.not(tampered.body.body, first!.body);
  for (const [what, request] of Object.entries(tampered)) t.notOk(verifies(shown.secret, request), `a tampered ${what} fails`);
  t.notOk(verifies(`whsec_${Buffer.alloc(32, 7).toString('base64')}`, first!), 'another secret fails');
  t.ok(legacyVerifies(shown.secret, first!), 'the former X-Webhook-Signature still verifies with the secret text');
  t.equal(first!.headers['x-webhook-id'], first!.headers['webhook-id']);

  const modern = await startTestPlatform(t, { ...options, webhookLegacySignature: false });
  const other = await owner(modern);
  const [only] = await deliver(modern, other);
  t.ok(verifies((await secretOf(modern, other.token)).secret, only!), 'verifies');
  t.notOk('x-webhook-signature' in only!.headers, 'no former header when WEBHOOK_LEGACY_SIGNATURE is off');
});

t.test('rotation: both secrets sign during the overlap, then only the new one', async (t) => {
  const api = await startTestPlatform(t, { ...options, webhookSecretOverlapMs: 2 * 3_600_000 });
  const user = await owner(api);
  const old = (await secretOf(api, user.token)).secret;
  const before = Date.now();
  const rotated = await api.request('POST', '/user/webhook-secret/rotate', { token: user.token });
  t.equal(rotated.status, 200);
  const { secret, previous_secret_expires_at } = rotated.body.data;
  t.match(secret, /^whsec_/);
  t.not(secret, old);
  const overlapEnds = Date.parse(previous_secret_expires_at);
  t.ok(Math.abs(overlapEnds - before - 2 * 3_600_000) < 60_000, 'the overlap is the configured 2 hours');
  t.same((await secretOf(api, user.token)), { secret, previous_secret_expires_at }, 'the secret route shows the same');

  const [during] = await deliver(api, user);
  t.match(during!.headers['webhook-signature'], /^v1,\S+ v1,\S+$/, 'two signatures, separated by a space');
  t.ok(verifies(secret, during!), 'verifies with the new secret');
  t.ok(verifies(old, during!), 'and with the old one');
  t.ok(legacyVerifies(secret, during!), 'the former header is keyed with the new secret at once');

  // The overlap's end is kept in the database's time: it passes there.
  await withClient(api.databaseUrl, (db) => db.query(`UPDATE users SET webhook_secret_previous_until = now() - interval '1 second' WHERE id = $1`, [user.id]));
  const [after] = await deliver(api, user);
  t.match(after!.headers['webhook-signature'], /^v1,\S+$/, 'one signature');
  t.ok(verifies(secret, after!), 'verifies with the new secret');
  t.notOk(verifies(old, after!), 'no longer with the old one');
  t.same((await secretOf(api, user.token)).previous_secret_expires_at, null);

  const immediate = await startTestPlatform(t, { ...options, webhookSecretOverlapMs: 0 });
  const other = await owner(immediate);
  const replaced = (await secretOf(immediate, other.token)).secret;
  const now = (await immediate.request('POST', '/user/webhook-secret/rotate', { token: other.token })).body.data;
  t.equal(now.previous_secret_expires_at, null, 'no overlap when it is 0');
  const [single] = await deliver(immediate, other);
  t.ok(verifies(now.secret, single!));
  t.notOk(verifies(replaced, single!));
});

t.test('a receiver answering 410 Gone disables the webhook', async (t) => {
  const api = await startTestPlatform(t, { ...options, webhookRetryDelaysMs: [3_600_000, 3_600_000, 3_600_000] });
  const user = await owner(api, '/gone');
  // A delivery of the same assistant waiting for its retry, as after an earlier failure.
  const waiting = await withClient(api.databaseUrl, async (db) =>
    Number((await db.query(
      `INSERT INTO webhook_deliveries (user_id, assistant_id, event, url, body, next_attempt_at) VALUES ($1, $2, 'call.ended', $3, '{}', now() + interval '1 hour') RETURNING id`,
      [user.id, user.assistantId, `${site.origin}/gone`],
    )).rows[0].id),
  );
  answers.set('/gone', [410]);
  const sent = await deliver(api, user);
  t.equal(sent.length, 1, 'one attempt, no retry');
  const log = (await api.request('GET', '/user/webhook-deliveries', { token: user.token })).body.data as Array<Record<string, unknown>>;
  t.match(log.find((d) => d.id !== waiting), { status: 'failed', attempts: 1, last_status_code: 410, last_error: "The receiver answered 410 Gone: the assistant's webhook was disabled." });
  t.match(log.find((d) => d.id === waiting), { status: 'cancelled', last_error: "Not sent: the assistant's webhook was disabled after its receiver answered 410 Gone." });
  t.match((await api.request('GET', `/user/assistant/${user.assistantId}`, { token: user.token })).body.data, { is_webhook_active: false, webhook_url: null });
  t.same(await deliver(api, user), [], 'the next call sends nothing');

  const enabled = await api.request('POST', '/user/assistants/enable-webhook', { token: user.token, body: { assistant_id: user.assistantId, webhook_url: `${site.origin}/new-home` } });
  t.equal(enabled.status, 200);
  const [again] = await deliver(api, user);
  t.equal(again?.path, '/new-home', 'setting the URL again re-enables it');

  // A 410 from the old URL for a delivery made before the move disables nothing.
  await withClient(api.databaseUrl, (db) =>
    db.query(`INSERT INTO webhook_deliveries (user_id, assistant_id, event, url, body) VALUES ($1, $2, 'call.ended', $3, '{}')`, [user.id, user.assistantId, `${site.origin}/gone`]),
  );
  answers.set('/gone', [410]);
  received.length = 0;
  api.platform.runtime.wakeWebhooks();
  await api.platform.runtime.settled();
  t.same(received.map((r) => r.path), ['/gone'], 'the old receiver answered 410');
  t.match((await api.request('GET', `/user/assistant/${user.assistantId}`, { token: user.token })).body.data, { is_webhook_active: true, webhook_url: `${site.origin}/new-home` });
});

t.test("a secret issued before Standard Webhooks keeps its key and its receivers' verifiers", async (t) => {
  const api = await startTestPlatform(t, options);
  const user = await owner(api);
  // The database as it was before the migration: the columns it adds absent, a secret of the former form.
  const key = Buffer.from(Array.from({ length: 32 }, (_, i) => 250 - i * 3));
  const former = `whsec_${key.toString('base64url')}`;
  t.match(former, /[-_]/, 'characters standard base64 does not have');
  const migration = (await loadMigrations()).find((m) => m.name.endsWith('_webhook_secrets_standard'))!;
  await withClient(api.databaseUrl, async (db) => {
    await db.query('DELETE FROM schema_migrations WHERE name = $1', [migration.name]);
    await db.query('ALTER TABLE users DROP COLUMN webhook_secret_legacy, DROP COLUMN webhook_secret_previous, DROP COLUMN webhook_secret_previous_until');
    await db.query('UPDATE users SET webhook_secret = $1 WHERE id = $2', [former, user.id]);
  });
  t.same(await migrate(api.databaseUrl, createLogger('silent')), [migration.name]);

  const shown = (await secretOf(api, user.token)).secret;
  t.equal(shown, `whsec_${key.toString('base64')}`, 'the same key bytes, in standard base64');
  const [delivery] = await deliver(api, user);
  t.ok(verifies(shown, delivery!), 'verifies with the secret shown now');
  t.ok(legacyVerifies(former, delivery!), 'the former header verifies with the text the owner had');

  const rotated = (await api.request('POST', '/user/webhook-secret/rotate', { token: user.token })).body.data.secret;
  const [next] = await deliver(api, user);
  t.ok(legacyVerifies(rotated, next!), 'after a rotation the former header is keyed with the new secret');
  t.ok(verifies(shown, next!), 'the standard one with the previous secret too, for the overlap');
});
