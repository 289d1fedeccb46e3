import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { twilioSignature } from '../api/routes/carriers/twilio.js';
import { MediaStreamPhone } from '../runtime/calls/carriers/loopback.js';
import { startFakeOpenAi, type FakeOpenAi } from './fakes/openai.js';
import { Conditions } from './helpers/conditions.js';
import { withClient } from './helpers/database.js';
import { WebCallLine } from './helpers/phone.js';
import { embeddedUrl, isRunning, startServer, until, type RunningServer as ServerProcess, type ServerProcessOptions } from './helpers/server_process.js';
import { html, startSite, type TestSite } from './helpers/site.js';

/**
 * The real server, started with `npm start` on its embedded PostgreSQL and stopped the way
 * supervisors and terminals stop it, then started again on the same data directory:
 * 1. SIGTERM to the process `npm start` started, while it holds live calls (two outbound over
 *    the Twilio media-stream protocol through the loopback carrier, an inbound one from a Twilio
 *    media stream here, a web call), a call whose webhook is being delivered, a document being
 *    crawled and two replies being written: new work is refused at once; the reply that comes
 *    within the grace is given, the other cut short and refunded; the process exits, its database
 *    stopped. After the restart every call has its final status, duration, cost, transcript (with
 *    the goodbye), recording, one ledger entry and exactly one delivered webhook; the document is
 *    ingested; no message is charged without a reply or a refund.
 * 2. The same with SIGINT to the whole process group (Ctrl-C in a terminal): the embedded
 *    PostgreSQL, in a session of its own, is stopped by the server after the calls are saved, not
 *    by the signal, and the signal npm passes on besides the terminal's is not taken for a second.
 */

const GRACE_SECONDS = 3;
const ADMIN = 'admin-token-0123456789';
const TWILIO_AUTH_TOKEN = 'twilio-auth-token-0123456789';

interface Receiver {
  readonly url: string;
  /** Deliveries by call id, in arrival order. */
  readonly byCall: Map<number, string[]>;
  /** Changes as each delivery arrives. */
  readonly arrivals: Conditions;
  /** Holds the next delivery's answer until `release`. */
  holdNext(): { arrived: Promise<number>; release(): void };
}

async function webhookReceiver(t: Test): Promise<Receiver> {
  const byCall = new Map<number, string[]>();
  const arrivals = new Conditions();
  let hold: { arrive: (id: number) => void; released: Promise<void> } | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    req.on('end', () => {
      const id = Number((JSON.parse(raw) as { id: number }).id);
      byCall.set(id, [...(byCall.get(id) ?? []), String(req.headers['x-webhook-id'])]);
      arrivals.changed();
      const held = hold;
      hold = undefined;
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      if (!held) return answer();
      held.arrive(id);
      void held.released.then(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    byCall,
    arrivals,
    holdNext() {
      let arrive!: (id: number) => void;
      let release!: () => void;
      const arrived = new Promise<number>((resolve) => (arrive = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      hold = { arrive, released };
      return { arrived, release };
    },
  };
}

/**
 * A caller on a Twilio media stream, sending a silent frame every 20 ms as a phone line does (in
 * real time: the server in its own process runs on the real clock).
 */
function streamingPhone(phone: { speak(): void; socket: { on(event: 'close', listener: () => void): unknown } }): void {
  const timer = setInterval(() => phone.speak(), 20);
  phone.socket.on('close', () => clearInterval(timer));
}

interface World {
  readonly dataDir: string;
  readonly fake: FakeOpenAi;
  readonly site: TestSite;
  readonly receiver: Receiver;
  /** How the server is started here: `npm start` on the world's data directory, with the fakes. */
  options(extra?: { detached?: boolean }): ServerProcessOptions;
}

async function world(t: Test): Promise<World> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-stop-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const fake = await startFakeOpenAi(t);
  const site = await startSite(t);
  const receiver = await webhookReceiver(t);
  return {
    dataDir,
    fake,
    site,
    receiver,
    options: (extra = {}) => ({ dataDir, npm: true, ...extra, env: { ADMIN_TOKEN: ADMIN, TWILIO_AUTH_TOKEN, OUTBOUND_ALLOW_PRIVATE: 'true', SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS), GROQ_API_KEY: 'gsk-test', GROQ_BASE_URL: fake.baseUrl } }),
  };
}

interface Account {
  readonly token: string;
  readonly userId: number;
  readonly outbound: number;
  readonly inboundNumber: string;
  readonly uuid: string;
  readonly chatUuid: string;
}

/** A funded user with an outbound assistant, an inbound one and a chat assistant on the fake model; calls are recorded and notify the receiver. */
async function account(server: ServerProcess, receiver: Receiver): Promise<Account> {
  const registered = await server.api('POST', '/auth/register', { name: 'Ada', email: 'ada@example.com', password: 'a long password' });
  const { token } = registered.body;
  const userId = registered.body.user.id as number;
  await server.api('POST', `/admin/users/${userId}/balance`, { amount: 25, reason: 'test' }, ADMIN);
  const offers = (await server.api('GET', '/user/phone-numbers/search?country_code=US', undefined, token)).body.data as Array<{ phone_number: string }>;
  for (const offer of offers.slice(0, 2)) await server.api('POST', '/user/phone-numbers/purchase', { phone_number: offer.phone_number }, token);
  const numbers = (await server.api('GET', '/user/phone-numbers/all', undefined, token)).body.data as Array<{ id: number; phone_number: string }>;
  const base = { voice_id: 1, language_id: 1, mode: 'pipeline', timezone: 'UTC', system_prompt: 'Help', llm_model_id: 6, record: true, webhook_url: receiver.url, is_webhook_active: true };
  const create = async (fields: Record<string, unknown>) => {
    const created = await server.api('POST', '/user/assistant', { ...base, ...fields }, token);
    if (created.status !== 201) throw new Error(JSON.stringify(created.body));
    return (await server.api('GET', `/user/assistant/${created.body.data.id}`, undefined, token)).body.data as { id: number; uuid: string };
  };
  const outbound = await create({ name: 'Out', type: 'outbound', phone_number_id: numbers[0]!.id, initial_message: 'Hello, this is Out.' });
  const inbound = await create({ name: 'In', type: 'inbound', phone_number_id: numbers[1]!.id, initial_message: 'Hello, this is In.' });
  const chat = await create({ name: 'Chat', type: 'inbound', llm_model_id: 4, initial_message: 'Hi' });
  return { token, userId, outbound: outbound.id, inboundNumber: numbers[1]!.phone_number, uuid: inbound.uuid, chatUuid: chat.uuid };
}

async function callOut(server: ServerProcess, a: Account, to: string): Promise<number> {
  const placed = await server.api('POST', '/user/calls', { assistant_id: a.outbound, phone_number: to }, a.token);
  if (placed.status !== 201) throw new Error(JSON.stringify(placed.body));
  return placed.body.data.id as number;
}

async function callIn(server: ServerProcess, a: Account, callSid: string): Promise<{ id: number; phone: MediaStreamPhone }> {
  // Signed as Twilio signs it: the server refuses unsigned webhooks.
  const webhook = `${server.origin}/api/telephony/twilio/inbound`;
  const form = new URLSearchParams({ To: a.inboundNumber, From: '+14155550199', CallSid: callSid });
  const answer = await fetch(webhook, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(TWILIO_AUTH_TOKEN, webhook, form) },
    body: form.toString(),
  }).then((r) => r.text());
  const url = /<Stream url="([^"]+)"/.exec(answer)![1]!;
  const id = /name="call_id" value="(\d+)"/.exec(answer)![1]!;
  const token = /name="token" value="([^"]+)"/.exec(answer)![1]!;
  const phone = new MediaStreamPhone(url, { callSid, customParameters: { call_id: id, token } }, { decode: false });
  await phone.open();
  streamingPhone(phone);
  return { id: Number(id), phone };
}

async function webCall(server: ServerProcess, a: Account): Promise<{ id: number; line: WebCallLine }> {
  const started = await server.api('POST', '/web-calls', { assistant_id: a.uuid });
  const line = new WebCallLine(started.body.websocket_url);
  await line.open();
  streamingPhone(line);
  return { id: started.body.call_id, line };
}

const status = async (server: ServerProcess, a: Account, id: number) => (await server.api('GET', `/user/calls/${id}`, undefined, a.token)).body.data?.status as string | undefined;

async function inProgress(server: ServerProcess, a: Account, ids: readonly number[]): Promise<void> {
  for (const id of ids) await until(`call ${id} to be answered`, async () => ((await status(server, a, id)) === 'in-progress' ? true : undefined));
}

/** What a restarted server shows of the calls, and what its database holds of their charges and deliveries. */
async function checkCalls(t: Test, server: ServerProcess, a: Account, db: string, receiver: Receiver, calls: ReadonlyArray<{ id: number; status: string; goodbye: boolean }>): Promise<void> {
  for (const call of calls) {
    const data = (await server.api('GET', `/user/calls/${call.id}`, undefined, a.token)).body.data;
    t.equal(data.status, call.status, `call ${call.id}: ${call.status}`);
    t.ok(data.duration > 0 && data.total_cost > 0, `call ${call.id}: its duration (${data.duration} s) and cost (${data.total_cost})`);
    t.match(data.transcript, /^assistant: Hello, this is (Out|In)\./, `call ${call.id}: its transcript`);
    if (call.goodbye) t.match(data.transcript, /assistant: Thank you for calling\. Goodbye\.$/, `call ${call.id}: the goodbye it heard`);
    t.match(data.recording_url, /\/api\/recordings\/\d+\.wav\?expires=\d+&signature=/, `call ${call.id}: its recording`);
    const recording = await fetch(data.recording_url);
    t.ok(recording.status === 200 && Number(recording.headers.get('content-length')) > 44, `call ${call.id}: the recording is served`);
  }
  const charges = await withClient(db, async (client) => (await client.query(`SELECT reference, count(*)::int AS n FROM ledger_entries WHERE kind = 'call' GROUP BY reference`)).rows as Array<{ reference: string; n: number }>);
  t.same(new Map(charges.map((row) => [Number(row.reference), row.n])), new Map(calls.map((call) => [call.id, 1])), 'one ledger entry per call');
  await receiver.arrivals.until(() => calls.every((call) => receiver.byCall.has(call.id)));
  const deliveries = await withClient(db, async (client) => (await client.query(`SELECT call_id, status FROM webhook_deliveries ORDER BY call_id`)).rows as Array<{ call_id: number; status: string }>);
  t.same(deliveries, calls.map((call) => ({ call_id: call.id, status: 'delivered' })).sort((x, y) => x.call_id - y.call_id), 'one delivery per call, each delivered');
  t.same(new Map([...receiver.byCall].map(([id, ids]) => [id, ids.length])), new Map(calls.map((call) => [call.id, 1])), 'the receiver got each exactly once');
}

/** How an operator stops the server: the signal, and to whom it goes. */
interface StopBy {
  readonly name: string;
  /** The server runs as a terminal's job: in a process group of its own. */
  readonly detached: boolean;
  send(server: ServerProcess): void;
}

/**
 * The server busy with everything that can be lost at once, stopped by `by`, and what the next
 * start finds.
 */
async function busyStopAndRestart(t: Test, by: StopBy): Promise<void> {
  const w = await world(t);
  const server = await startServer(t, w.options({ detached: by.detached }));
  const a = await account(server, w.receiver);

  const outbound = [await callOut(server, a, '+14155550101'), await callOut(server, a, '+14155550102')];
  const inbound = await callIn(server, a, 'CA00000000000000000000000000000001');
  const web = await webCall(server, a);
  const hungUp = await webCall(server, a);
  await inProgress(server, a, [...outbound, inbound.id, web.id, hungUp.id]);
  // A call that ends before the stop, its webhook still being delivered when the signal comes.
  const heldDelivery = w.receiver.holdNext();
  // It talks for a while on the server's real clock first: its greeting is in its transcript.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  hungUp.line.hangUp();
  t.equal(await heldDelivery.arrived, hungUp.id, 'the ended call\'s webhook is in flight');

  let crawled = false;
  w.site.route('/manual', () => (crawled ? { body: html('Manual', '<p>Support hours are nine to five.</p>') } : { body: '', heldUntil: new Promise(() => {}) }));
  const kb = (await server.api('POST', '/user/knowledgebases', { name: 'KB' }, a.token)).body.data.id;
  const doc = (await server.api('POST', `/user/knowledgebases/${kb}/documents`, { name: 'Manual', type: 'website', url: `${w.site.origin}/manual` }, a.token)).body.data.id;
  await w.site.requested('/manual');

  let releaseReply!: () => void;
  w.fake.scriptChat({ text: 'The answer came in time.', heldUntil: new Promise<void>((resolve) => (releaseReply = resolve)) }, { text: 'Too late.', heldUntil: new Promise(() => {}) });
  const conversations = [0, 1].map(async () => (await server.api('POST', '/conversations', { assistant_id: a.chatUuid })).body.conversation_id as string);
  const [answered, cut] = await Promise.all(conversations);
  const first = server.api('POST', `/conversations/${answered}/messages`, { message: 'First' });
  await w.fake.received(1);
  const second = server.api('POST', `/conversations/${cut}/messages`, { message: 'Second' });
  await w.fake.received(2);

  const signalled = Date.now();
  by.send(server);
  // Logged as the stop begins refusing new work.
  await server.line('stopping: new calls, messages and requests are refused');
  t.match(await server.api('GET', '/../health'), { status: 503, body: { status: 'stopping' } }, 'health says stopping at once');
  const refused = await server.api('GET', '/user', undefined, a.token);
  t.match(refused, { status: 503, body: { message: /restarting/ } }, 'REST is 503');
  t.equal(refused.headers.get('retry-after'), '5', 'with Retry-After');
  releaseReply();
  heldDelivery.release();
  t.match(await first, { status: 200, body: { status: true, message: 'The answer came in time.' } }, 'the reply that came within the grace is given');
  t.match(await second, { status: 503, body: { status: false } }, 'the one still being written after it is cut short (503: try again)');

  const exit = await server.exited;
  const stoppedIn = Date.now() - signalled;
  t.equal(exit.code, 0, 'npm start exits 0');
  t.notOk(isRunning(server.pid), 'the server process is gone (no orphan)');
  t.ok(stoppedIn < (GRACE_SECONDS + 20) * 1000, `from the signal to the exit: ${stoppedIn} ms (grace ${GRACE_SECONDS} s)`);
  t.equal(server.log.filter((l) => /^shutting down|^second signal/.test(l.msg)).length, 1, 'one stop, never taken for a second signal');
  // By the lines' own times (pino may hand two lines written in the same millisecond to the pipe out of order).
  const at = (msg: string) => server.log.filter((l) => l.msg === msg).map((l) => Date.parse(String(l.time)));
  const endsSaved = Math.max(...at('call status'));
  const [databaseStopped] = at('embedded PostgreSQL stopped');
  t.ok(databaseStopped !== undefined && databaseStopped >= endsSaved, 'the calls ended first, then the server stopped its database');
  t.ok(at('platform stopped').every((time) => time >= databaseStopped!), 'last of all');
  t.notOk(server.log.some((l) => l.msg === 'call state could not be saved'), 'every call state was saved');
  await t.rejects(stat(join(w.dataDir, 'postgres', 'postmaster.pid')), 'no PostgreSQL is left running');
  t.ok(inbound.phone.closed && web.line.closed, 'the callers on the line were hung up on');
  t.comment(`stop after ${by.name}: ${stoppedIn} ms with ${outbound.length + 2} live calls, grace ${GRACE_SECONDS} s`);

  crawled = true;
  const restarted = await startServer(t, w.options());
  const db = await embeddedUrl(restarted, w.dataDir);
  await checkCalls(t, restarted, a, db, w.receiver, [
    ...outbound.map((id) => ({ id, status: 'ended', goodbye: true })),
    { id: inbound.id, status: 'ended', goodbye: true },
    { id: web.id, status: 'ended', goodbye: true },
    { id: hungUp.id, status: 'ended_by_customer', goodbye: false },
  ]);
  // Logged once its outcome is recorded.
  await restarted.line((line) => line.msg === 'document ingested' && line.documentId === doc);
  const document = (await restarted.api('GET', `/user/knowledgebases/${kb}/documents/${doc}`, undefined, a.token)).body.data;
  t.match(document, { status: 'active' }, 'the document crawled at the stop was taken up again and ingested');
  const messages = await withClient(db, async (client) => ({
    pending: Number((await client.query(`SELECT count(*) AS n FROM conversation_messages WHERE reply_pending`)).rows[0].n),
    ledger: (await client.query(`SELECT kind, count(*)::int AS n FROM ledger_entries WHERE kind LIKE 'conversation%' GROUP BY kind ORDER BY kind`)).rows,
  }));
  t.same(messages, { pending: 0, ledger: [{ kind: 'conversation_message', n: 2 }, { kind: 'conversation_refund', n: 1 }] }, 'two messages charged, the one cut short refunded, none owed a reply');

  restarted.child.kill('SIGTERM');
  t.same(await restarted.exited, { code: 0, signal: null });
}

t.test('SIGTERM to the process npm start started, with everything under way; then a restart', (t) =>
  busyStopAndRestart(t, { name: 'SIGTERM', detached: false, send: (server) => void server.child.kill('SIGTERM') }),
);

t.test('SIGINT to the whole process group (Ctrl-C in a terminal), with everything under way; then a restart', (t) =>
  busyStopAndRestart(t, { name: 'SIGINT to the group', detached: true, send: (server) => process.kill(-server.child.pid!, 'SIGINT') }),
);
