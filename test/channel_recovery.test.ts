/**
 * What a channel message survives, on one process (fakes: the Graph API and an OpenAI-compatible
 * model; the database's failures are injected with a trigger):
 * 1. the database failing while the reply is stored: the message is tried again (not answered
 *    with an apology), and answered once: one reply, charged once, held once in the history.
 * 2. a message whose reply can never be stored is tried three times, then passed over by the next
 *    sweep: kept in the history (not charged) and the customer asked to write again.
 * 3. a message found with AI on, but accepted by the engine (it waited for another turn) once the
 *    owner turned AI off, is kept, not charged nor answered; a widget message is charged as ever.
 * 4. a backlog of abandoned conversations (more than one sweep has room for) is taken up as room
 *    is made, not one sweep period at a time.
 * 5. a reply part whose sending lease lapsed to another attempt is not sent by the first: the
 *    check right before the channel is asked says so (and renews the lease of the attempt holding it).
 */
import t from 'tap';
import { claimPart, stillSending } from '../runtime/channels/outboxStore.js';
import { startFakeOpenAi } from './fakes/openai.js';
import { signHub, startWhatsAppFake, textMessageWebhook } from './fakes/whatsapp.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const PHONE_ID = '106540352242922';
const TOKEN = 'EAAG-test-access-token';
const APP_SECRET = 'test-app-secret';
const FAILED_NOTICE = "Sorry, I couldn't answer that just now. Please send your message again in a moment.";

const llm = await startFakeOpenAi(t);
const graph = await startWhatsAppFake({ [PHONE_ID]: TOKEN });
t.teardown(() => graph.close());
// Abandoned inboxes are looked for only when a test says so (takeAbandoned), or when room is made.
const api = await startTestPlatform(
  t,
  { llmProviders: { openai: { baseUrl: llm.baseUrl, apiKey: 'sk-test' } }, channels: { whatsappApiUrl: graph.apiUrl, whatsappApiVersion: 'v21.0', secretsKey: undefined } },
  { channelInboxSweepMs: 3_600_000 },
);
const owner = await api.user('Owner');
await api.credit(owner.id, 10);
const assistant = await api.assistant(owner.token);
const created = await api.request('POST', '/user/channels', {
  token: owner.token,
  body: { type: 'whatsapp', assistant_id: assistant.id, phone_number_id: PHONE_ID, access_token: TOKEN, app_secret: APP_SECRET, verify_token: 'verify-recovery' },
});
t.equal(created.status, 201);
const channels = api.platform.runtime.services.channels;
const sql = (text: string, values: unknown[] = []) => withClient(api.databaseUrl, (db) => db.query(text, values));
const balance = async () => (await api.request('GET', '/user', { token: owner.token })).body.data.balance as number;
const spent = async (before: number) => Math.round((before - (await balance())) * 100) / 100;
const sentTo = (customer: string) => graph.sent.filter((s) => s.to === customer.replace('+', '')).map((s) => s.text);
const conversationOf = async (customer: string) => (await sql('SELECT id::text FROM conversations WHERE customer_phone = $1', [customer])).rows[0].id as string;
const historyOf = async (customer: string) =>
  (await api.request('GET', `/conversations/${await conversationOf(customer)}`, { token: owner.token })).body.history.map((m: { role: string; content: string }) => `${m.role}: ${m.content}`);

let counter = 0;
/** A customer writes; resolves with the webhook's answer (the message kept), before it is answered. */
function notify(from: string, text: string) {
  const raw = JSON.stringify(textMessageWebhook({ phoneNumberId: PHONE_ID, from, id: `wamid.recovery.${++counter}`, text }));
  return api.request('POST', '/channels/whatsapp/webhook', { raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHub(APP_SECRET, raw) } });
}
/** A customer writes; resolves once this process answered and sent everything. */
async function write(from: string, text: string) {
  t.equal((await notify(from, text)).status, 200);
  await channels.idle();
}

/** Replies with this text cannot be queued for the channel: the first `times` times (0: ever). */
async function failStoring(text: string, times: number) {
  await sql(`CREATE SEQUENCE IF NOT EXISTS injected_failures`);
  await sql(`SELECT setval('injected_failures', 1, false)`);
  await sql(`CREATE OR REPLACE FUNCTION injected_failure() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- A sequence is not rolled back with the failing transaction: it counts the attempts.
      IF NEW.body = ${`'${text}'`} AND (${times} = 0 OR nextval('injected_failures') <= ${times}) THEN
        RAISE EXCEPTION 'injected database failure';
      END IF;
      RETURN NEW;
    END $$`);
  await sql('DROP TRIGGER IF EXISTS injected_failure ON channel_outbound');
  await sql('CREATE TRIGGER injected_failure BEFORE INSERT ON channel_outbound FOR EACH ROW EXECUTE FUNCTION injected_failure()');
  t.teardown(() => sql('DROP TRIGGER IF EXISTS injected_failure ON channel_outbound'));
}

t.test('the database failing while the reply is stored: tried again, answered once', async (t) => {
  const customer = '+15553330001';
  await failStoring('Stored the second time.', 1);
  llm.scriptChat({ text: 'Stored the second time.' }, { text: 'Stored the second time.' });
  const before = await balance();
  const asked = llm.requests.length;
  await write(customer, 'Can you hear me?');
  t.same(sentTo(customer), [], 'nothing sent yet, and no apology');
  t.equal(await spent(before), 0, 'the failed turn was refunded');
  t.equal(await channels.takeAbandoned(), 1, 'the message waits to be tried again');
  await channels.idle();
  t.same(sentTo(customer), ['Stored the second time.']);
  t.equal(llm.requests.length - asked, 2);
  t.equal(await spent(before), 0.01, 'charged once');
  t.same(await historyOf(customer), ['user: Can you hear me?', 'assistant: Stored the second time.'], 'held once');
});

t.test('a reply that can never be stored: passed over after three attempts, the customer told', async (t) => {
  const customer = '+15553330002';
  await failStoring('Never stored.', 0);
  llm.scriptChat({ text: 'Never stored.' }, { text: 'Never stored.' }, { text: 'Never stored.' });
  const before = await balance();
  const asked = llm.requests.length;
  await write(customer, 'Hello?');
  for (const attempt of [2, 3]) {
    t.equal(await channels.takeAbandoned(), 1, `attempt ${attempt}`);
    await channels.idle();
  }
  t.same(sentTo(customer), [], 'nothing sent while it is tried');
  t.equal(await channels.takeAbandoned(), 1, 'then the next sweep passes it over');
  await channels.idle();
  t.equal(llm.requests.length - asked, 3, 'without a fourth attempt');
  t.equal(await channels.takeAbandoned(), 0, 'and it is not looked at again');
  t.same(sentTo(customer), [FAILED_NOTICE]);
  t.same(await historyOf(customer), ['user: Hello?', `assistant: ${FAILED_NOTICE}`], 'the message is kept, once');
  t.equal(await spent(before), 0, 'not charged');
  t.equal((await sql('SELECT count(*)::int AS n FROM channel_inbound i JOIN conversations c ON c.id = i.conversation_id WHERE c.customer_phone = $1 AND NOT i.done', [customer])).rows[0].n, 0);
});

t.test('AI turned off while the message waits for its turn: kept, not charged', async (t) => {
  const customer = '+15553330003';
  llm.scriptChat({ text: 'First answer.' });
  await write(customer, 'First');
  const id = await conversationOf(customer);
  // Another turn holds the conversation (a reply being written elsewhere): the next message waits for it in the engine.
  await sql("UPDATE conversations SET turn_until = now() + interval '1 minute', turn_owner = gen_random_uuid() WHERE id = $1", [id]);
  const before = await balance();
  const asked = llm.requests.length;
  const reads = graph.reads.length;
  const posted = notify(customer, 'Second');
  // The inbox marks a message read once it has found AI on for it, just before the engine takes it.
  await graph.waitForReads(reads + 1);
  t.equal((await api.request('PATCH', `/user/conversations/${id}`, { token: owner.token, body: { ai_enabled: false } })).status, 200);
  await sql('UPDATE conversations SET turn_until = NULL WHERE id = $1', [id]);
  t.equal((await posted).status, 200);
  await channels.idle();
  t.equal(await spent(before), 0, 'a channel message AI will not answer is not charged');
  t.equal(llm.requests.length, asked, 'nor answered');
  t.same(await historyOf(customer), ['user: First', 'assistant: First answer.', 'user: Second'], 'but kept');
  t.same(sentTo(customer), ['First answer.']);
  const widget = (await api.request('POST', '/conversations', { body: { assistant_id: assistant.uuid } })).body.conversation_id as string;
  await api.request('PATCH', `/user/conversations/${widget}`, { token: owner.token, body: { ai_enabled: false } });
  await api.request('POST', `/conversations/${widget}/messages`, { body: { message: 'Anyone?' } });
  t.equal(await spent(before), 0.01, 'a widget message is charged, AI or not, as before');
});

t.test('a backlog of abandoned conversations is taken up as fast as it is answered', async (t) => {
  const customers = Array.from({ length: 20 }, (_, i) => `+1555444${String(i).padStart(4, '0')}`);
  for (const customer of customers) await write(customer, 'First');
  const channelId = created.body.data.id as number;
  // Messages a stopped process kept and gave up (after a restart, say): more than one sweep has room for.
  await sql(
    `INSERT INTO channel_inbound (channel_id, external_id, conversation_id, kind, body)
     SELECT $1, 'wamid.backlog.' || c.customer_phone, c.id, 'text', 'Still there?' FROM conversations c WHERE c.customer_phone = ANY($2)`,
    [channelId, customers],
  );
  const sent = graph.sent.length;
  t.equal(await channels.takeAbandoned(), 8, 'one sweep takes what this process has room to answer');
  await channels.idle();
  t.equal(graph.sent.length - sent, 20, 'and room made takes the rest up, with no wait for the next sweep');
  t.equal((await sql('SELECT count(*)::int AS n FROM channel_inbound WHERE NOT done')).rows[0].n, 0);
});

t.test('a part whose lease lapsed to another attempt is not sent by the first', async (t) => {
  llm.scriptChat({ text: 'Sent once.' });
  await write('+15553330004', 'Send it once');
  // The sending loops stop, so that only this test claims parts from here on.
  await channels.stop();
  const partId = (await sql("SELECT o.id FROM channel_outbound o JOIN conversations c ON c.id = o.conversation_id WHERE c.customer_phone = '+15553330004'")).rows[0].id as number;
  await sql("UPDATE channel_outbound SET state = 'sending', attempts = 1, lease_until = now() - interval '1 second' WHERE id = $1", [partId]);
  const pool = api.platform.runtime.pool;
  const taken = (await claimPart(pool))!;
  t.match(taken, { id: partId, attempts: 2 }, 'another attempt claims the lapsed part');
  t.equal(await stillSending(pool, { ...taken, attempts: 1 }), null, 'the first attempt learns it is not its to send');
  t.match(await stillSending(pool, taken), { id: created.body.data.id, type: 'whatsapp' }, 'the attempt holding it goes on, with its channel');
  t.ok((await sql('SELECT lease_until > now() + interval \'20 seconds\' AS renewed FROM channel_outbound WHERE id = $1', [partId])).rows[0].renewed, 'its lease renewed for the send');
});
