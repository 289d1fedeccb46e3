/**
 * Three real server processes on loopback sharing one PostgreSQL database behind a round-robin
 * TCP proxy (test/helpers/roundRobinProxy.ts), the proxy's origin their PUBLIC_URL; every request
 * on a connection of its own, so consecutive requests land on consecutive processes. The
 * processes are started once for the file and the scenarios run in this order (the last ones
 * kill processes):
 * 1. A conversation's messages spread over the three: each gets one reply, stored in order; a
 *    burst of them sent at once is still answered one turn at a time, each message once.
 * 2. Documents created on the three are each crawled and ingested once (one `document ingested`
 *    line in all the logs, its page fetched once, its chunks written once) and become active.
 * 3. A web call whose socket lands on the process that created it: greeting, a second of talk, the
 *    caller hangs up; ended with its transcript, charged once.
 * 4. A hang-up sent to another process than the one holding a web call ends it.
 * 5. Webhooks: calls ended on each of the three processes are each delivered once, signed
 *    (Standard Webhooks `webhook-id` unique, one per call).
 * 6-9: calls are held by the process that accepts their media stream.
 * 6. A web call whose socket lands on another process than the one that created it completes.
 * 7. An inbound Twilio call whose voice webhook, media stream and status callback land on three
 *    different processes completes.
 * 8. An outbound Twilio call placed on one process, answered (stream) on another, its status
 *    callbacks on the third, completes.
 * 9. A hang-up sent to a third process ends a Twilio call whose webhook and stream were on the
 *    other two; Twilio is asked to hang up.
 * 10. A document uploaded to a process whose ingestion slot is busy is ingested by the process
 *    that takes its job (its bytes are kept in PostgreSQL).
 * 11 (todo while the processes have data directories of their own). A call's recording URL, as any
 *    process gives it, is served by every process: the key that signs it is shared (PostgreSQL),
 *    but the file is under the DATA_DIR of the process that held the call, so across machines
 *    that directory must be shared.
 * 12. A process killed (SIGKILL) while holding a web call: the proxy skips it and a survivor's
 *    sweep settles the call (ended, charged once, its webhook delivered once).
 * 13. The process holding a Twilio call whose webhook another took is killed: the
 *    survivor settles it.
 * `AP_TEST_RUN_TODO=1` runs the todo scenarios.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { Webhook } from 'standardwebhooks';
import { twilioSignature } from '../api/routes/carriers/twilio.js';
import { MediaStreamPhone } from '../runtime/calls/carriers/loopback.js';
import { startFakeTwilio } from './fakes/twilio.js';
import { Conditions } from './helpers/conditions.js';
import { withClient } from './helpers/database.js';
import { WebCallLine, type PhoneLine } from './helpers/phone.js';
import { startServerCluster, type ServerCluster } from './helpers/serverCluster.js';
import { until } from './helpers/server_process.js';
import { html, startSite } from './helpers/site.js';

const ADMIN = 'admin-token-0123456789';
const TWILIO_SID = 'AC0123456789abcdef0123456789abcdef';
const TWILIO_TOKEN = 'twilio-auth-token-0123456789';
const CALLER = '+14155550199';
/** `AP_TEST_RUN_TODO=1` runs the todo scenarios as ordinary tests (tap skips a todo test's body). */
const todo = (reason: string) => (process.env.AP_TEST_RUN_TODO ? {} : { todo: reason });
const SHARED_RECORDINGS = todo('a recording is kept under the DATA_DIR of the process that held the call');

/** A Standard Webhooks receiver: every delivery verified against the owner's secret, kept with its `webhook-id`. */
async function webhookReceiver(t: Test) {
  const deliveries: Array<{ webhookId: string; callId: number; verified: boolean }> = [];
  const arrivals = new Conditions();
  let secret: string | undefined;
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    req.on('end', () => {
      let verified = false;
      try {
        new Webhook(secret!).verify(raw, req.headers as Record<string, string>);
        verified = true;
      } catch {}
      deliveries.push({ webhookId: String(req.headers['webhook-id']), callId: Number((JSON.parse(raw) as { id: number }).id), verified });
      arrivals.changed();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    deliveries,
    useSecret: (value: string) => void (secret = value),
    /** Resolves once every call of `ids` has had a delivery. */
    delivered: (ids: readonly number[]) => arrivals.until(() => ids.every((id) => deliveries.some((d) => d.callId === id))),
  };
}

const twilio = await startFakeTwilio(t, TWILIO_SID, TWILIO_TOKEN);
const site = await startSite(t);
const receiver = await webhookReceiver(t);
const starting = Date.now();
const cluster: ServerCluster = await startServerCluster(t, {
  env: {
    ADMIN_TOKEN: ADMIN,
    TWILIO_ACCOUNT_SID: TWILIO_SID,
    TWILIO_AUTH_TOKEN: TWILIO_TOKEN,
    TWILIO_API_URL: twilio.apiUrl,
    OUTBOUND_ALLOW_PRIVATE: 'true',
    RATE_LIMIT_PER_IP_PER_MINUTE: '100000',
    // One extraction thread each: three processes share two cores, and each starts its pool at once.
    WORKER_POOL_SIZE: '1',
    // One document at a time per process, so a test can tell which process is free to take a job.
    INGESTION_CONCURRENCY: '1',
    // A killed process's calls are settled within seconds rather than a minute; still ample for
    // three servers sharing two cores to vouch for their live calls in time.
    CALL_HEARTBEAT_MS: '500',
    CALL_ORPHAN_AFTER_MS: '3000',
    CALL_SWEEP_MS: '1000',
  },
});
t.comment(`three processes listening in ${Date.now() - starting} ms`);
const [p0, p1, p2] = [0, 1, 2];

/** The funded owner of every assistant here: web/inbound, outbound, chat; calls notify the receiver. */
async function account() {
  const registered = await cluster.api('POST', '/auth/register', { body: { name: 'Ada', email: 'ada@example.com', password: 'a long password' } });
  const token = registered.body.token as string;
  await cluster.api('POST', `/admin/users/${registered.body.user.id}/balance`, { body: { amount: 50, reason: 'test' }, token: ADMIN });
  const offers = (await cluster.api('GET', '/user/phone-numbers/search?country_code=US', { token })).body.data as Array<{ phone_number: string }>;
  for (const offer of offers.slice(0, 2)) await cluster.api('POST', '/user/phone-numbers/purchase', { body: { phone_number: offer.phone_number }, token });
  const numbers = (await cluster.api('GET', '/user/phone-numbers/all', { token })).body.data as Array<{ id: number; phone_number: string }>;
  receiver.useSecret((await cluster.api('GET', '/user/webhook-secret', { token })).body.data.secret);
  const base = { voice_id: 1, language_id: 1, mode: 'pipeline', timezone: 'UTC', system_prompt: 'Help', llm_model_id: 6, webhook_url: receiver.url, is_webhook_active: true };
  const create = async (fields: Record<string, unknown>) => {
    const created = await cluster.api('POST', '/user/assistant', { body: { ...base, ...fields }, token });
    if (created.status !== 201) throw new Error(`assistant: ${created.status} ${JSON.stringify(created.body)}`);
    return (await cluster.api('GET', `/user/assistant/${created.body.data.id}`, { token })).body.data as { id: number; uuid: string };
  };
  const inbound = await create({ name: 'In', type: 'inbound', phone_number_id: numbers[0]!.id, initial_message: 'Hello, this is In.' });
  const outbound = await create({ name: 'Out', type: 'outbound', phone_number_id: numbers[1]!.id, initial_message: 'Hello, this is Out.' });
  const recorded = await create({ name: 'Rec', type: 'inbound', record: true, initial_message: 'Hello, this is In.' });
  const chat = await create({ name: 'Chat', type: 'inbound', is_webhook_active: false, webhook_url: null, initial_message: 'Hi.' });
  return { token, userId: registered.body.user.id as number, inbound, outbound, recorded, chat, inboundNumber: numbers[0]!.phone_number };
}
const a = await account();

const call = async (id: number) => (await cluster.api('GET', `/user/calls/${id}`, { token: a.token })).body.data as Record<string, any>;

/**
 * The call once its end is saved (its final status is saved first, with every status change, and
 * its duration, transcript and costs with its end), as the API shows it through the proxy.
 */
async function endedCall(id: number, withinMs = 30_000): Promise<Record<string, any>> {
  await until(`call ${id} to end`, () =>
    withClient(cluster.databaseUrl, async (db) => ((await db.query(`SELECT 1 FROM calls WHERE id = $1 AND ended_at IS NOT NULL`, [id])).rowCount ? true : undefined)),
  withinMs);
  return call(id);
}

/** Ledger entries of each call, by call id. */
const callCharges = () =>
  withClient(cluster.databaseUrl, async (db) => new Map((await db.query(`SELECT reference, count(*)::int AS n FROM ledger_entries WHERE kind = 'call' GROUP BY reference`)).rows.map((row) => [Number(row.reference), row.n as number])));

/** The process that logged the call's move to `status`, once one has. */
const loggedStatus = (callId: number, status: string) =>
  until(`a process to log call ${callId} ${status}`, () => {
    const found = cluster.processes.filter((p) => p.log.some((line) => line.msg === 'call status' && line.callId === callId && line.status === status));
    return found.length > 0 ? found.map((p) => p.index) : undefined;
  });

/** A caller's line that sends a silent frame every 20 ms (real time: the servers run on the real clock), counting audible frames it hears. */
function streaming<L extends PhoneLine>(line: L): L & { audible: () => number } {
  let audible = 0;
  line.on('audio', (frame: Int16Array) => void (frame.some((sample) => sample !== 0) && audible++));
  const timer = setInterval(() => line.speak(), 20);
  line.socket.on('close', () => clearInterval(timer));
  line.socket.on('error', () => clearInterval(timer));
  return Object.assign(line, { audible: () => audible });
}

/**
 * Waits until the call is in progress and its greeting is heard; fails at once, saying so, if the
 * stream is closed first (a process that does not hold the call refuses its stream).
 */
async function answered(id: number, line: PhoneLine & { audible: () => number }, streamProcess: number): Promise<void> {
  await until(`call ${id} in progress with its greeting heard`, async () => {
    if (line.closed) throw new Error(`the stream of call ${id} was closed by process ${streamProcess} (${(await call(id)).status})`);
    return (await call(id)).status === 'in-progress' && line.audible() > 10 ? true : undefined;
  });
}

/**
 * Waits until the call has been in progress for a second with its greeting in its transcript, as
 * any process shows a live call (its own session, or what the holder last wrote at a heartbeat).
 */
async function talked(id: number): Promise<void> {
  await until(`call ${id} to talk for a second`, async () => {
    const live = await call(id);
    return live.duration >= 1 && /^assistant: Hello, this is In\./.test(live.transcript ?? '') ? true : undefined;
  });
}

/** A web call (to the inbound assistant, unless named) created on process `on`, its socket opened through the proxy to process `streamTo`. */
async function webCall(on: number, streamTo: number, assistant = a.inbound.uuid) {
  const started = await cluster.api('POST', '/web-calls', { body: { assistant_id: assistant }, to: on });
  if (started.status !== 201) throw new Error(`web call: ${started.status} ${JSON.stringify(started.body)}`);
  cluster.proxy.nextTo(streamTo);
  const line = streaming(new WebCallLine(started.body.websocket_url as string));
  // A refused upgrade leaves the socket to its opener (ws does not close it): ended here, with its frames.
  await line.open().catch((error: Error) => {
    line.socket.terminate();
    throw error;
  });
  return { id: started.body.call_id as number, line };
}

/** An inbound Twilio call: its signed voice webhook to process `webhookTo`, its media stream through the proxy to `streamTo`. */
async function twilioCallIn(callSid: string, webhookTo: number, streamTo: number) {
  const url = `${cluster.origin}/api/telephony/twilio/inbound`;
  const form = new URLSearchParams({ To: a.inboundNumber, From: CALLER, CallSid: callSid, AccountSid: TWILIO_SID, Direction: 'inbound', CallStatus: 'ringing' });
  const answer = await cluster.api('POST', '/telephony/twilio/inbound', { form, headers: { 'x-twilio-signature': twilioSignature(TWILIO_TOKEN, url, form) }, to: webhookTo });
  const twiml = String(answer.body);
  const stream = /<Stream url="([^"]+)"/.exec(twiml)?.[1];
  const id = /name="call_id" value="(\d+)"/.exec(twiml)?.[1];
  const token = /name="token" value="([^"]+)"/.exec(twiml)?.[1];
  if (!stream || !id || !token) throw new Error(`no stream in TwiML: ${twiml}`);
  cluster.proxy.nextTo(streamTo);
  const phone = streaming(new MediaStreamPhone(stream.replace(/&amp;/g, '&'), { callSid, customParameters: { call_id: id, token } }, { decode: true }));
  await phone.open();
  return { id: Number(id), phone };
}

/** Twilio's status callback for call `id`, signed, to process `to`. */
async function twilioStatus(id: number, callSid: string, status: string, to: number) {
  const path = `/telephony/twilio/status?call_id=${id}`;
  const form = new URLSearchParams({ CallSid: callSid, AccountSid: TWILIO_SID, CallStatus: status });
  return cluster.api('POST', path, { form, headers: { 'x-twilio-signature': twilioSignature(TWILIO_TOKEN, `${cluster.origin}/api${path}`, form) }, to });
}

t.test('1. a conversation spread over three processes: one reply per message, in order', async (t) => {
  const id = (await cluster.api('POST', '/conversations', { body: { assistant_id: a.chat.uuid, type: 'test' }, token: a.token })).body.conversation_id as string;
  const served: number[] = [];
  for (let i = 1; i <= 6; i++) {
    const sent = await cluster.api('POST', `/conversations/${id}/messages`, { body: { message: `Message ${i}` } });
    t.match(sent, { status: 200, body: { status: true, message: `Thanks for your message. You wrote: "Message ${i}"` } }, `message ${i} answered`);
    served.push(sent.upstream);
  }
  t.same(served, [0, 1, 2, 0, 1, 2].map((k) => (k + served[0]!) % 3), `the messages went to each process in turn (${served.join(', ')})`);

  // A burst: three at once, one per process; each turn waits for the one before it.
  const burst = ['Burst A', 'Burst B', 'Burst C'];
  const replies = await Promise.all(burst.map((message) => cluster.api('POST', `/conversations/${id}/messages`, { body: { message } })));
  t.same(new Set(replies.map((reply) => reply.upstream)), new Set([p0, p1, p2]), 'the burst landed on all three');
  for (const [i, reply] of replies.entries()) t.match(reply.body, { status: true, message: `Thanks for your message. You wrote: "${burst[i]}"` });

  const history = ((await cluster.api('GET', `/conversations/${id}`)).body.history as Array<{ role: string; content: string }>).map((m) => `${m.role}: ${m.content}`);
  t.same(history.slice(0, 13), ['assistant: Hi.', ...[1, 2, 3, 4, 5, 6].flatMap((i) => [`user: Message ${i}`, `assistant: Thanks for your message. You wrote: "Message ${i}"`])], 'the messages and replies in the order sent');
  const rest = history.slice(13);
  t.equal(rest.length, 6, 'the burst: three messages, three replies');
  for (let i = 0; i < rest.length; i += 2) {
    const message = /^user: (.*)$/.exec(rest[i]!)?.[1];
    t.equal(rest[i + 1], `assistant: Thanks for your message. You wrote: "${message}"`, `each burst message is followed by its own reply (${message})`);
  }
  t.same(new Set(rest.filter((line) => line.startsWith('user: '))), new Set(burst.map((m) => `user: ${m}`)), 'each burst message stored once');
});

t.test('2. documents created on three processes are each ingested once', async (t) => {
  const pages = ['/one', '/two', '/three', '/four', '/five', '/six'];
  for (const page of pages) site.route(page, { body: html(page, `<p>The page ${page.slice(1)} says support hours are nine to five on weekdays.</p>`) });
  const kb = (await cluster.api('POST', '/user/knowledgebases', { body: { name: 'KB' }, token: a.token })).body.data.id as number;
  const docs: number[] = [];
  const created: number[] = [];
  for (const page of pages) {
    const doc = await cluster.api('POST', `/user/knowledgebases/${kb}/documents`, { body: { name: page, type: 'website', url: `${site.origin}${page}`, relative_links_limit: 1 }, token: a.token });
    t.equal(doc.status, 201, `document ${page} created`);
    docs.push(doc.body.data.id as number);
    created.push(doc.upstream);
  }
  t.same(new Set(created), new Set([p0, p1, p2]), 'created on all three');
  for (const doc of docs) {
    await until(`document ${doc} active`, async () => ((await cluster.api('GET', `/user/knowledgebases/${kb}/documents/${doc}`, { token: a.token })).body.data.status === 'active' ? true : undefined));
  }
  const ingested = (doc: number) => cluster.processes.flatMap((p) => p.log.filter((line) => line.msg === 'document ingested' && line.documentId === doc).map(() => p.index));
  await until('each ingestion logged', () => (docs.every((doc) => ingested(doc).length > 0) ? true : undefined));
  for (const [i, doc] of docs.entries()) {
    t.equal(ingested(doc).length, 1, `document ${doc} ingested once (by process ${ingested(doc)[0]})`);
    t.equal(site.requests.filter((url) => url.split('?')[0] === pages[i]).length, 1, `its page fetched once`);
  }
  const chunks = await withClient(cluster.databaseUrl, async (db) => (await db.query(`SELECT document_id, count(*)::int AS n, max(chunk_index)::int AS last FROM document_chunks WHERE knowledgebase_id = $1 GROUP BY document_id`, [kb])).rows);
  t.equal(chunks.length, docs.length, 'every document has chunks');
  t.ok(chunks.every((row) => row.n === row.last + 1), 'each document\'s chunks written once (indexes 0..n-1)');
  t.comment(`ingested by processes ${docs.map((doc) => ingested(doc)[0]).join(', ')}`);
});

t.test('3. a web call whose socket lands on the process that created it completes', async (t) => {
  const { id, line } = await webCall(p1, p1);
  await answered(id, line, p1);
  t.same(await loggedStatus(id, 'in-progress'), [p1], 'the creating process holds it');
  await talked(id);
  line.hangUp();
  const ended = await endedCall(id);
  t.match(ended, { status: 'ended_by_customer' });
  t.match(ended.transcript, /^assistant: Hello, this is In\./, 'its transcript');
  t.ok(ended.duration > 0 && ended.total_cost > 0, `charged ${ended.total_cost} for ${ended.duration} s`);
  t.equal((await callCharges()).get(id), 1, 'one ledger entry');
});

t.test('4. a hang-up sent to another process ends a web call', async (t) => {
  const { id, line } = await webCall(p0, p0);
  await answered(id, line, p0);
  const closed = new Promise<number>((resolve) => line.on('close', resolve));
  const hangup = await cluster.api('POST', `/user/calls/${id}/hangup`, { token: a.token, to: p2 });
  t.equal(hangup.upstream, p2, 'the hang-up went to another process');
  t.match(hangup, { status: 200, body: { message: 'Call ended successfully', data: { status: 'ended' } } });
  t.equal(await closed, 1000, 'the caller\'s socket is closed normally');
  t.match(await endedCall(id), { status: 'ended' });
  t.equal((await callCharges()).get(id), 1, 'one ledger entry');
});

t.test('5. calls ended on each of the three processes: each webhook delivered once', async (t) => {
  const calls = [];
  for (const on of [p0, p1, p2]) calls.push(await webCall(on, on));
  for (const [i, { id, line }] of calls.entries()) await answered(id, line, i);
  for (const { line } of calls) line.hangUp();
  const ids = calls.map((c) => c.id);
  for (const id of ids) await endedCall(id);
  for (const [i, id] of ids.entries()) t.same(await loggedStatus(id, 'ended_by_customer'), [i], `call ${id} ended on process ${i}`);
  await receiver.delivered(ids);
  // Every delivery is in the outbox's rows: once all are delivered no retry is due.
  await until('every delivery settled', () =>
    withClient(cluster.databaseUrl, async (db) => ((await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE call_id = ANY($1) AND status = 'delivered'`, [ids])).rows[0].n === ids.length ? true : undefined)),
  );
  const mine = receiver.deliveries.filter((d) => ids.includes(d.callId));
  t.same(mine.map((d) => d.callId).sort(), [...ids].sort(), 'one delivery per call');
  t.equal(new Set(mine.map((d) => d.webhookId)).size, ids.length, 'webhook-id unique');
  t.ok(mine.every((d) => d.verified), 'each verifies with the owner\'s secret');
});

t.test('6. a web call whose socket lands on another process completes', async (t) => {
  const { id, line } = await webCall(p0, p1).catch((error: Error) => {
    throw new Error(`the stream was refused: ${error.message}`);
  });
  await answered(id, line, p1);
  t.same(await loggedStatus(id, 'in-progress'), [p1], 'the stream process holds it');
  line.hangUp();
  t.match(await endedCall(id), { status: 'ended_by_customer' });
  t.equal((await callCharges()).get(id), 1, 'one ledger entry');
});

t.test('7. an inbound Twilio call: webhook, media stream and status callback on three processes', async (t) => {
  const callSid = 'CAf0000000000000000000000000000008';
  const { id, phone } = await twilioCallIn(callSid, p0, p1);
  await answered(id, phone, p1);
  t.same(await loggedStatus(id, 'in-progress'), [p1], 'the stream process holds it');
  await talked(id);
  phone.hangUp();
  const ended = await endedCall(id);
  t.match(ended, { type: 'inbound', status: 'ended_by_customer', client_phone_number: CALLER });
  t.equal((await twilioStatus(id, callSid, 'completed', p2)).status, 200, "Twilio's completed callback on the third process is answered");
  t.match(await call(id), { status: 'ended_by_customer' }, 'and changes nothing');
  t.ok(ended.duration > 0 && ended.total_cost > 0, `charged ${ended.total_cost} for ${ended.duration} s`);
  t.equal((await callCharges()).get(id), 1, 'one ledger entry');
  await receiver.delivered([id]);
});

t.test('8. an outbound Twilio call placed on one process and answered on another', async (t) => {
  const before = twilio.requests.length;
  const placed = await cluster.api('POST', '/user/calls', { body: { assistant_id: a.outbound.id, phone_number: '+14155550101' }, token: a.token, to: p0 });
  t.equal(placed.status, 201, 'placed on process 0');
  const id = placed.body.data.id as number;
  await twilio.answered(() => twilio.requests.slice(before).some((r) => r.sid));
  const create = twilio.requests.slice(before).find((r) => r.sid)!;
  t.equal(create.form.get('StatusCallback'), `${cluster.origin}/api/telephony/twilio/status?call_id=${id}`, 'its callbacks come through the load balancer');
  t.equal((await twilioStatus(id, create.sid!, 'ringing', p1)).status, 200);
  const twiml = create.form.get('Twiml')!;
  const parameters = Object.fromEntries([...twiml.matchAll(/<Parameter name="([^"]+)" value="([^"]+)"\/>/g)].map(([, name, value]) => [name!, value!]));
  cluster.proxy.nextTo(p2);
  const phone = streaming(new MediaStreamPhone(/<Stream url="([^"]+)"/.exec(twiml)![1]!.replace(/&amp;/g, '&'), { callSid: create.sid!, customParameters: parameters }));
  await phone.open();
  t.equal((await twilioStatus(id, create.sid!, 'in-progress', p1)).status, 200);
  await answered(id, phone, p2);
  t.same(await loggedStatus(id, 'in-progress'), [p2], 'the stream process holds it');
  t.equal((await twilioStatus(id, create.sid!, 'completed', p0)).status, 200);
  t.match(await endedCall(id), { type: 'outbound', status: 'completed' });
  await until('the stream closed', () => (phone.closed ? true : undefined));
  t.equal((await callCharges()).get(id), 1, 'one ledger entry');
});

t.test('9. a hang-up sent to a third process ends a Twilio call held by another', async (t) => {
  const callSid = 'CAf0000000000000000000000000000010';
  const { id, phone } = await twilioCallIn(callSid, p0, p1);
  await answered(id, phone, p1);
  const updates = twilio.requests.length;
  const hangup = await cluster.api('POST', `/user/calls/${id}/hangup`, { token: a.token, to: p2 });
  t.match(hangup, { status: 200, body: { data: { status: 'ended' } } });
  await until('the stream closed', () => (phone.closed ? true : undefined));
  await twilio.answered(() => twilio.requests.slice(updates).some((r) => r.path.endsWith(`/Calls/${callSid}.json`)));
  t.match(twilio.requests.slice(updates).find((r) => r.path.endsWith(`/Calls/${callSid}.json`))!.form.get('Status'), 'completed', 'Twilio is asked to hang up');
  t.equal((await callCharges()).get(id), 1, 'one ledger entry');
});

t.test('10. an uploaded document is ingested by whichever process takes its job', async (t) => {
  const kb = (await cluster.api('POST', '/user/knowledgebases', { body: { name: 'Uploads' }, token: a.token })).body.data.id as number;
  // Three crawls held by the site: one per process, each process's only ingestion slot.
  const heldBy = new Map<string, number>();
  const releases = new Map<string, () => void>();
  t.teardown(() => releases.forEach((release) => release()));
  for (const name of ['/held-a', '/held-b', '/held-c']) {
    const gate = new Promise<void>((resolve) => releases.set(name, resolve));
    site.route(name, (req) => {
      heldBy.set(name, req.socket.remotePort!);
      return { body: html(name, '<p>This page was held while the upload waited for a free process.</p>'), heldUntil: gate };
    });
    t.equal((await cluster.api('POST', `/user/knowledgebases/${kb}/documents`, { body: { name, type: 'website', url: `${site.origin}${name}`, relative_links_limit: 1 }, token: a.token })).status, 201);
  }
  await until('three crawls held', () => (heldBy.size === 3 ? true : undefined));
  const crawlOf = new Map([...heldBy].map(([name, port]) => [cluster.processOf(port), name]));
  t.same(new Set(crawlOf.keys()), new Set([p0, p1, p2]), 'each process holds one crawl');

  const form = new FormData();
  form.set('name', 'Notes');
  form.set('type', 'txt');
  form.set('file', new Blob(['Opening hours: nine to five on weekdays.'], { type: 'text/plain' }), 'notes.txt');
  const upload = await cluster.api('POST', `/user/knowledgebases/${kb}/documents`, { form, token: a.token, to: p0 });
  t.equal(upload.status, 201, 'uploaded to process 0, whose slot is busy');
  const doc = upload.body.data.id as number;
  // Process 1's crawl ends; its slot is the only one free, and the upload's job the only one due.
  releases.get(crawlOf.get(p1)!)!();
  const status = await until(`document ${doc} settled`, async () => {
    const current = (await cluster.api('GET', `/user/knowledgebases/${kb}/documents/${doc}`, { token: a.token })).body.data.status as string;
    return current === 'processing' ? undefined : current;
  });
  const took = await until(`the outcome of document ${doc} logged`, () => {
    const found = cluster.processes.filter((p) => p.log.some((line) => /^document (ingested|failed)$/.test(line.msg) && line.documentId === doc));
    return found.length > 0 ? found.map((p) => p.index) : undefined;
  });
  t.same(took, [p1], 'process 1 took its job');
  t.equal(status, 'active', 'and ingested the file process 0 received');
});

t.test('11. a call\'s recording is served by every process', SHARED_RECORDINGS, async (t) => {
  const { id, line } = await webCall(p1, p1, a.recorded.uuid);
  await answered(id, line, p1);
  await talked(id);
  line.hangUp();
  const url = new URL((await endedCall(id)).recording_url as string);
  t.equal(url.origin, cluster.origin, 'its URL is the load balancer\'s');
  for (const to of [p0, p1, p2]) {
    const got = await cluster.api('GET', `${url.pathname.replace(/^\/api/, '')}${url.search}`, { to });
    t.equal(got.status, 200, `served by process ${to}`);
  }
});

t.test('12. a process killed while holding a web call: the survivors settle it', async (t) => {
  const { id, line } = await webCall(p2, p2);
  await answered(id, line, p2);
  await talked(id);
  await cluster.kill(p2);
  t.same(cluster.proxy.up(), [p0, p1], 'the proxy skips the killed process');
  const after = [];
  for (let i = 0; i < 4; i++) after.push(await cluster.api('GET', '/user', { token: a.token }));
  t.ok(after.every((answer) => answer.status === 200), 'requests go on being answered');
  t.same(new Set(after.map((answer) => answer.upstream)), new Set([p0, p1]), 'by the two survivors');
  await until('the caller\'s socket cut', () => (line.closed ? true : undefined));
  const ended = await endedCall(id, 20_000);
  t.match(ended, { status: 'ended' }, 'ended by a survivor\'s sweep');
  t.ok(ended.duration > 0, `charged up to when it was last heard: ${ended.duration} s`);
  t.equal((await callCharges()).get(id), 1, 'one ledger entry');
  await receiver.delivered([id]);
  t.equal(receiver.deliveries.filter((d) => d.callId === id).length, 1, 'its webhook delivered once');
  const settledBy = cluster.processes.filter((p) => p.log.some((line) => line.msg === 'ended and charged calls left open by a stopped process' && (line.calls as number[]).includes(id)));
  t.equal(settledBy.length, 1, `settled by one survivor (process ${settledBy.map((p) => p.index).join(', ')})`);
});

t.test('13. the process holding a Twilio call is killed: a survivor settles it', async (t) => {
  const { id, phone } = await twilioCallIn('CAf0000000000000000000000000000011', p0, p1);
  await answered(id, phone, p1);
  await talked(id);
  await cluster.kill(p1);
  await until('the stream cut', () => (phone.closed ? true : undefined));
  t.match(await endedCall(id, 20_000), { status: 'ended' }, 'ended by the survivor');
  t.equal((await callCharges()).get(id), 1, 'one ledger entry');
  await receiver.delivered([id]);
  t.equal(receiver.deliveries.filter((d) => d.callId === id).length, 1, 'its webhook delivered once');
});
