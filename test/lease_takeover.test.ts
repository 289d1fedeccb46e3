/**
 * Every background worker writes its result only while it holds its lease. Two workers share one
 * database, each on a clock of its own that stands still (so neither polls unless told to): worker
 * A claims a piece of work and is held mid-way, its lease is made to have run out (leases are kept
 * in database time), and worker B takes the work over. B is a whole platform; A is one too, but for
 * the document job, where it is the ingestion worker alone with a crawler held as long as the test
 * needs (a real page would reach its own time limit first):
 * 1. a webhook delivery: B's attempt is delivered and recorded; A's late answer (the receiver got
 *    both requests, with one webhook-id) is dropped, so the delivery log and the call keep B's
 *    outcome; A logs the lost lease and counts it.
 * 2. a document job: while A works, its renewals (every third of the lease, on its clock) keep the
 *    lease; once it has run out, B ingests the document; A's late chunks are dropped, so the
 *    document's chunks are B's alone, each once.
 * 3. a post-call evaluation: A's renewals keep its lease while the model reads, and stop when it
 *    is done; taken over by B's sweep, A's result arriving first is dropped, B's is written (on the
 *    call and in the webhook's copy), once.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { ManualClock } from '../runtime/clock.js';
import type { Crawler } from '../runtime/knowledge/crawler.js';
import { createLocalEmbedder } from '../runtime/knowledge/embedder.js';
import { createIngestion } from '../runtime/knowledge/ingestion.js';
import { createLogger } from '../runtime/logger.js';
import { createPostgresSearchIndex } from '../runtime/search/postgres.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { createWorkerPool } from '../runtime/workers.js';
import { startFakeOpenAi } from './fakes/openai.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { startTestPlatform, type TestPlatform } from './helpers/platform.js';
import { html, startSite } from './helpers/site.js';
import { endCall } from './helpers/webhooks.js';

const site = await startSite(t);

type Line = Record<string, unknown>;

/**
 * Two platforms on one fresh database, each on a manual clock; A's log lines are kept. Both run
 * before the work is queued (A's held request must not reach its own time limit while B starts).
 */
async function twoPlatforms(t: Test, config: Record<string, unknown> = {}) {
  const databaseUrl = await freshDatabase();
  const lines: Line[] = [];
  const [clockA, clockB] = [new ManualClock(), new ManualClock()];
  const a = await startTestPlatform(t, { databaseUrl, outboundAllowPrivate: true, ...config }, { clock: clockA }, (line) => lines.push(line));
  const b = await startTestPlatform(t, { databaseUrl, outboundAllowPrivate: true, ...config }, { clock: clockB });
  await Promise.all([a.platform.runtime.settled(), b.platform.runtime.settled()]);
  return { databaseUrl, a, b, clockA, clockB, lines };
}

/** A's count of results dropped for a lost lease, by worker. */
async function dropped(api: TestPlatform, worker: string): Promise<number> {
  const metric = await api.platform.runtime.metrics.registry.getSingleMetric('background_results_dropped_total')!.get();
  return metric.values.find((value) => value.labels.worker === worker)?.value ?? 0;
}

/** A promise and the function that settles it. */
function gate(): { held: Promise<void>; release: () => void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  return { held, release };
}

const query = <T = any>(databaseUrl: string, text: string, values: unknown[] = []) => withClient(databaseUrl, async (db) => (await db.query(text, values)).rows as T[]);

t.test('a webhook attempt whose lease was taken over records nothing', async (t) => {
  const { databaseUrl, a, b, lines } = await twoPlatforms(t, { webhookRetryDelaysMs: [0, 0, 0] });
  const first = gate();
  const received: Array<string | string[] | undefined> = [];
  site.route('/leased-hook', (req) => {
    received.push(req.headers['webhook-id']);
    // A's attempt is answered (a failure) only once B's has been recorded.
    return received.length === 1 ? { status: 500, type: 'text/plain', body: 'from A', heldUntil: first.held } : { status: 200, type: 'text/plain', body: 'from B' };
  });
  const user = await a.user();
  const assistant = await a.assistant(user.token, { is_webhook_active: true, webhook_url: `${site.origin}/leased-hook` });
  const { callId, queued } = await endCall(databaseUrl, user.id, assistant.id);
  t.ok(queued, 'the delivery is queued');
  a.platform.runtime.wakeWebhooks();
  await site.requested('/leased-hook');

  // A's attempt outlives its lease (the receiver hangs, the process stalls): B takes the delivery over.
  await query(databaseUrl, `UPDATE webhook_deliveries SET lease_expires_at = now() - interval '1 second' WHERE call_id = $1`, [callId]);
  b.platform.runtime.wakeWebhooks();
  await b.platform.runtime.settled();
  const recorded = { status: 'delivered', attempts: 2, last_status_code: 200, last_response: 'from B' };
  const delivery = async () => (await query(databaseUrl, 'SELECT status, attempts, last_status_code, last_response FROM webhook_deliveries WHERE call_id = $1', [callId]))[0];
  t.same(await delivery(), recorded, "B's attempt is recorded");

  first.release();
  await a.platform.runtime.settled();
  t.equal(received.length, 2, 'the receiver got both attempts');
  t.equal(received[0], received[1], 'under one webhook-id, for it to de-duplicate');
  t.same(await delivery(), recorded, "A's late failure changes nothing: no retry is scheduled");
  t.same((await a.request('GET', `/user/calls/${callId}`, { token: user.token })).body.data.webhook_response, { status: 200, body: 'from B' }, "the call keeps B's answer");
  t.match(lines.find((line) => line.msg === 'the lease on a webhook delivery was taken over; its result is dropped'), { level: 40, attempt: 1 });
  t.equal(await dropped(a, 'webhook'), 1);
});

/**
 * Worker A of the document job: the ingestion worker over the real database, worker pool, local
 * embedder and PostgreSQL search index, whose crawler (the outside web) answers `text` once `held`
 * settles, on a clock that stands still. Its log lines are kept; it counts the results it drops.
 */
async function heldIngestion(t: Test, databaseUrl: string, leaseMs: number, text: string, held: Promise<void>) {
  const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 4 });
  const workers = createWorkerPool(1);
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-lease-'));
  const lines: Line[] = [];
  const crawling = gate();
  const counted = { dropped: 0 };
  const clock = new ManualClock();
  const crawler = {
    async crawl(input: { url?: string }) {
      crawling.release();
      await held;
      return { blocks: [{ kind: 'paragraph', text, url: input.url }] };
    },
  } as unknown as Crawler;
  const ingestion = createIngestion({
    pool,
    workers,
    embedder: createLocalEmbedder(workers),
    index: createPostgresSearchIndex(pool),
    crawler,
    dataDir,
    logger: createLogger('info', { write: (line: string) => lines.push(JSON.parse(line) as Line) }),
    clock,
    concurrency: 1,
    leaseMs,
    onLeaseLost: () => counted.dropped++,
  });
  t.teardown(async () => {
    await ingestion.stop();
    await workers.close();
    await pool.end();
    await rm(dataDir, { recursive: true, force: true });
  });
  return { ingestion, clock, lines, crawling: crawling.held, counted };
}

t.test("a document job's late run writes no chunks over the run that took it over", async (t) => {
  const leaseMs = 30_000;
  const databaseUrl = await freshDatabase();
  const clockB = new ManualClock();
  const b = await startTestPlatform(t, { databaseUrl, outboundAllowPrivate: true, ingestionLeaseMs: leaseMs }, { clock: clockB });
  site.route('/leased-manual', { body: html('Manual', '<p>Beta: support hours are nine to five on weekdays.</p><p>Beta: refunds take five working days.</p>') });
  const user = await b.user();
  const kb = (await b.request('POST', '/user/knowledgebases', { token: user.token, body: { name: 'KB' } })).body.data.id;
  // Queued as the knowledge service queues it, without waking B: A claims it first.
  const [{ id: doc }] = await query(databaseUrl, `INSERT INTO documents (knowledgebase_id, user_id, name, type, source) VALUES ($1, $2, 'Manual', 'website', $3) RETURNING id`, [
    kb,
    user.id,
    JSON.stringify({ url: `${site.origin}/leased-manual` }),
  ]);
  await query(databaseUrl, 'INSERT INTO document_jobs (document_id) VALUES ($1)', [doc]);
  const first = gate();
  const a = await heldIngestion(t, databaseUrl, leaseMs, 'Alpha: the old opening hours were eight to four.', first.held);
  a.ingestion.start();
  await a.crawling;

  // While A works its renewals keep the lease: one falls due every third of it, on A's clock.
  const lease = async () => (await query(databaseUrl, `SELECT extract(epoch FROM lease_expires_at - now()) * 1000 AS left_ms FROM document_jobs WHERE document_id = $1`, [doc]))[0].left_ms as number;
  await query(databaseUrl, `UPDATE document_jobs SET lease_expires_at = now() + interval '1 second' WHERE document_id = $1`, [doc]);
  a.clock.advance(leaseMs / 3);
  await a.clock.settled();
  t.ok((await lease()) > leaseMs - 5_000, 'renewed for a whole lease');

  // Then A stalls past its lease: B's next poll claims the job and ingests the document.
  await query(databaseUrl, `UPDATE document_jobs SET lease_expires_at = now() - interval '1 second' WHERE document_id = $1`, [doc]);
  clockB.advance(1_000);
  await clockB.settled();
  await b.platform.runtime.settled();
  const chunks = async () => (await query<{ content: string }>(databaseUrl, 'SELECT content FROM document_chunks WHERE document_id = $1 ORDER BY chunk_index', [doc])).map((row) => row.content);
  const ingested = await chunks();
  t.ok(ingested.length > 0 && ingested.every((content) => content.includes('Beta')), "B's chunks are written");
  t.same(await query(databaseUrl, 'SELECT status, attempts FROM document_jobs WHERE document_id = $1', [doc]), [{ status: 'done', attempts: 2 }]);

  first.release();
  await a.ingestion.idle();
  t.match(a.lines.find((line) => line.msg === 'the lease on a document job was taken over; its result is dropped'), { level: 40, documentId: doc, attempt: 1, result: 'indexed' }, "A's run went on to its chunks");
  t.equal(a.counted.dropped, 1);
  t.same(await chunks(), ingested, "A's late chunks are dropped: B's alone, each once");
  t.match((await b.request('GET', `/user/knowledgebases/${kb}/documents/${doc}`, { token: user.token })).body.data, { status: 'active', error: null });
  const found = await b.request('POST', `/user/knowledgebases/${kb}/search`, { token: user.token, body: { query: 'opening hours' } });
  t.notOk((found.body.data as Array<{ content: string }>).some((hit) => hit.content.includes('Alpha')), 'nothing of A is searchable');
});

t.test('an evaluation taken over is written once, by the run that holds it', async (t) => {
  const fake = await startFakeOpenAi(t);
  const { databaseUrl, a, b, clockA, lines } = await twoPlatforms(t, { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } } });
  const [replyA, replyB] = [gate(), gate()];
  fake.scriptChat({ text: '{"customer_name":"from A"}', heldUntil: replyA.held }, { text: '{"customer_name":"from B"}', heldUntil: replyB.held });
  site.route('/evaluated-hook', { status: 200, type: 'text/plain', body: 'ok' });
  const user = await a.user();
  const assistant = await a.assistant(user.token, { post_call_schema: [{ name: 'customer_name', type: 'string', description: 'Name of the caller' }] });
  const { callId } = await endCall(databaseUrl, user.id, assistant.id);
  // The call's end as the voice engine saves it: its evaluation pending, its webhook held for it.
  await query(databaseUrl, `UPDATE calls SET evaluation_status = 'pending', evaluation = NULL WHERE id = $1`, [callId]);
  await query(databaseUrl, `INSERT INTO webhook_deliveries (user_id, assistant_id, call_id, event, url, body, next_attempt_at) VALUES ($1, $2, $3, 'call.ended', $4, '{}', now() + interval '1 hour')`, [
    user.id,
    assistant.id,
    callId,
    `${site.origin}/evaluated-hook`,
  ]);
  const evaluator = a.platform.runtime.services.evaluator;
  await evaluator.idle();
  const timers = clockA.pending;
  evaluator.evaluate(callId);
  await fake.received(1);

  // While the model reads, A's renewals keep the lease (one every 20 s of A's clock)...
  const leaseLeft = async () => (await query(databaseUrl, `SELECT extract(epoch FROM evaluation_lease_expires_at - now()) * 1000 AS left_ms FROM calls WHERE id = $1`, [callId]))[0].left_ms as number | null;
  t.equal(clockA.pending, timers + 1, 'a renewal is due');
  await query(databaseUrl, `UPDATE calls SET evaluation_lease_expires_at = now() + interval '1 second' WHERE id = $1`, [callId]);
  clockA.advance(20_000);
  await clockA.settled();
  t.ok((await leaseLeft())! > 50_000, 'renewed for a whole lease');

  // ...until A stalls past it: B's sweep takes the evaluation up.
  await query(databaseUrl, `UPDATE calls SET evaluation_lease_expires_at = now() - interval '1 second' WHERE id = $1`, [callId]);
  const swept = b.platform.runtime.services.evaluator.sweep();
  await fake.received(2);

  replyA.release();
  await evaluator.settled(callId);
  const state = async () => (await query(databaseUrl, 'SELECT evaluation_status AS status, evaluation FROM calls WHERE id = $1', [callId]))[0];
  t.same(await state(), { status: 'pending', evaluation: null }, "A's result, first to arrive, is not written");
  t.equal(clockA.pending, timers, 'A renews no more');
  t.match(lines.find((line) => line.msg === "the lease on a call's evaluation was taken over; its result is dropped"), { level: 40, callId });
  t.equal(await dropped(a, 'evaluation'), 1);

  replyB.release();
  t.equal(await swept, 1);
  await b.platform.runtime.settled();
  t.same(await state(), { status: 'done', evaluation: { customer_name: 'from B' } }, "B's is");
  const [delivery] = await query(databaseUrl, 'SELECT body FROM webhook_deliveries WHERE call_id = $1', [callId]);
  t.same(JSON.parse(delivery.body).extracted_variables, { customer_name: 'from B' }, "and the webhook carries B's");
  t.equal(await leaseLeft(), null, 'its lease ended with it');
});
