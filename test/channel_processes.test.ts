/**
 * Channel conversations across server processes on one database (fakes: the Graph API and an
 * OpenAI-compatible model):
 * 1. a customer's two messages reach two processes while the first is being answered: they are
 *    answered in the order they came, the second with the first exchange in its history.
 * 2. a process stopped mid-reply (no grace) gives the conversation up: its turn is refunded, and
 *    another process answers the message once; the customer is charged once, and the history and
 *    the model hold the message once.
 * 3. a server process killed (SIGKILL) mid-reply: once its leases lapse, another process answers
 *    the message; the customer receives one reply, is charged once, and the history holds it once.
 * 4. a process whose inbox lease lapsed mid-reply (its renewals failing): no sweep takes the
 *    conversation while its turn runs, and a process the customer's next message takes it waits
 *    for the turn rather than answer beside it; the late reply is not stored nor sent (no apology
 *    either), and both messages are answered once each, in order, charged once each.
 * 5. a process stopped while a tool call of its reply hangs: the stop ends (the turn cut short
 *    after its 10 s), and another process answers the message once, charged once.
 * 6. a process whose inbox lapsed while its engine waited to take the message (another turn held
 *    the conversation): when the turn ends it stores nothing (the accept is fenced by the lease),
 *    and the process that took the inbox answers both messages once each, in order.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { startFakeOpenAi } from './fakes/openai.js';
import { signHub, startWhatsAppFake, textMessageWebhook } from './fakes/whatsapp.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { ADMIN_TOKEN, startTestPlatform, type TestPlatform } from './helpers/platform.js';
import { startSite } from './helpers/site.js';
import { startServer } from './helpers/server_process.js';

const PHONE_ID = '106540352242922';
const TOKEN = 'EAAG-test-access-token';
const APP_SECRET = 'test-app-secret';
const KEY = randomBytes(32);

const llm = await startFakeOpenAi(t);
const graph = await startWhatsAppFake({ [PHONE_ID]: TOKEN });
t.teardown(() => graph.close());

const settings = (databaseUrl?: string) => ({
  ...(databaseUrl ? { databaseUrl } : {}),
  llmProviders: { openai: { baseUrl: llm.baseUrl, apiKey: 'sk-test' } },
  channels: { whatsappApiUrl: graph.apiUrl, whatsappApiVersion: 'v21.0', secretsKey: KEY },
});

/** Abandoned inboxes are taken up when a test says so (takeAbandoned), not by a periodic sweep racing it. */
const quietSweeps = { channelInboxSweepMs: 3_600_000 };

/** An owner, an assistant and a WhatsApp channel on `api`'s database. */
async function channelOwner(api: TestPlatform, phoneId: string) {
  const owner = await api.user('Owner');
  await api.credit(owner.id, 10);
  const assistant = await api.assistant(owner.token);
  graph.token(phoneId, TOKEN);
  const created = await api.request('POST', '/user/channels', {
    token: owner.token,
    body: { type: 'whatsapp', assistant_id: assistant.id, phone_number_id: phoneId, access_token: TOKEN, app_secret: APP_SECRET, verify_token: `verify-${phoneId}` },
  });
  if (created.status !== 201) throw new Error(JSON.stringify(created.body));
  return owner;
}

let counter = 0;
async function notify(origin: string, phoneId: string, from: string, text: string) {
  const raw = JSON.stringify(textMessageWebhook({ phoneNumberId: phoneId, from, id: `wamid.process.${++counter}`, text }));
  const response = await fetch(`${origin}/api/channels/whatsapp/webhook`, { method: 'POST', body: raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHub(APP_SECRET, raw) } });
  return response.status;
}
const sentTo = (from: string) => graph.sent.filter((s) => s.to === from.replace('+', '')).map((s) => s.text);
const channelsOf = (api: TestPlatform) => api.platform.runtime.services.channels;
/** The customer's conversation as the owner reads it: `role: content` lines. */
async function historyOf(api: TestPlatform, token: string, customer: string): Promise<string[]> {
  const id = await withClient(api.databaseUrl, async (db) => (await db.query('SELECT id::text FROM conversations WHERE customer_phone = $1', [customer])).rows[0].id as string);
  return (await api.request('GET', `/conversations/${id}`, { token })).body.history.map((m: { role: string; content: string }) => `${m.role}: ${m.content}`);
}
const balanceOf = async (api: TestPlatform, token: string) => (await api.request('GET', '/user', { token })).body.data.balance as number;

t.test('two messages on two processes are answered in order', async (t) => {
  const a = await startTestPlatform(t, settings(), quietSweeps);
  const b = await startTestPlatform(t, settings(a.databaseUrl), quietSweeps);
  await channelOwner(a, '1001');
  let release!: () => void;
  llm.scriptChat({ text: 'First answer.', heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Second answer.' });
  const asked = llm.requests.length;
  t.equal(await notify(a.origin, '1001', '+15557770001', 'First question'), 200);
  await llm.received(asked + 1);
  t.equal(await notify(b.origin, '1001', '+15557770001', 'Second question'), 200, 'the second is kept by the other process while the first is answered');
  release();
  await channelsOf(a).idle();
  await channelsOf(b).idle();
  t.same(sentTo('+15557770001'), ['First answer.', 'Second answer.']);
  const second = llm.requests.at(-1)!.body.messages.slice(1).map((m: { role: string; content: string }) => `${m.role}: ${m.content}`);
  t.same(second, ['user: First question', 'assistant: First answer.', 'user: Second question'], 'the second was answered knowing the first exchange');
});

t.test('a process stopped mid-reply hands the message over; charged once', async (t) => {
  const a = await startTestPlatform(t, settings(), quietSweeps);
  const b = await startTestPlatform(t, settings(a.databaseUrl), quietSweeps);
  const owner = await channelOwner(a, '1002');
  let release!: () => void;
  llm.scriptChat({ text: 'Never heard.', heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Answered by the other process.' });
  const asked = llm.requests.length;
  const before = await balanceOf(b, owner.token);
  t.equal(await notify(a.origin, '1002', '+15557770002', 'Hello?'), 200);
  await llm.received(asked + 1);
  await a.platform.close({ graceMs: 0 });
  release();
  t.equal(await channelsOf(b).takeAbandoned(), 1, 'the other process takes the conversation up at once');
  await channelsOf(b).idle();
  t.same(sentTo('+15557770002'), ['Answered by the other process.']);
  t.equal(Math.round((before - (await balanceOf(b, owner.token))) * 100) / 100, 0.01, 'charged once: the cut-short turn was refunded');
  t.same(llm.requests.at(-1)!.body.messages.slice(1).map((m: { content: string }) => m.content), ['Hello?'], 'the model read the message once');
  t.same(await historyOf(b, owner.token, '+15557770002'), ['user: Hello?', 'assistant: Answered by the other process.'], 'the history holds it once');
});

t.test('a server killed mid-reply: another process answers once the lease lapses', async (t: Test) => {
  const databaseUrl = await freshDatabase();
  const survivor = await startTestPlatform(t, settings(databaseUrl), quietSweeps);
  const owner = await channelOwner(survivor, '1003');
  const before = await balanceOf(survivor, owner.token);
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-channel-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const doomed = await startServer(t, {
    dataDir,
    env: {
      DATABASE_URL: databaseUrl,
      ADMIN_TOKEN: ADMIN_TOKEN,
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: llm.baseUrl,
      WHATSAPP_API_URL: graph.apiUrl,
      CHANNEL_SECRETS_KEY: KEY.toString('hex'),
    },
  });
  let release!: () => void;
  llm.scriptChat({ text: 'Lost with the process.', heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Answered after the kill.' });
  const asked = llm.requests.length;
  t.equal(await notify(doomed.origin, '1003', '+15557770003', 'Are you open?'), 200);
  await llm.received(asked + 1);
  process.kill(doomed.pid, 'SIGKILL');
  await doomed.exited;
  release();
  t.equal(await channelsOf(survivor).takeAbandoned(), 0, 'not while the killed process\'s lease holds');
  // Its leases (60 s each) run out: the conversation's inbox, and the turn its engine held.
  await withClient(databaseUrl, (db) => db.query("UPDATE conversations SET inbox_until = now() - interval '1 second', turn_until = now() - interval '1 second' WHERE customer_phone = '+15557770003'"));
  t.equal(await channelsOf(survivor).takeAbandoned(), 1);
  await channelsOf(survivor).idle();
  t.same(sentTo('+15557770003'), ['Answered after the kill.']);
  t.same(await historyOf(survivor, owner.token, '+15557770003'), ['user: Are you open?', 'assistant: Answered after the kill.'], 'the history holds it once');
  t.equal(Math.round((before - (await balanceOf(survivor, owner.token))) * 100) / 100, 0.01, 'charged once: the killed turn\'s charge was refunded');
});

t.test('an inbox taken over mid-reply: the late reply is dropped, the message answered once', async (t) => {
  const a = await startTestPlatform(t, settings(), quietSweeps);
  const b = await startTestPlatform(t, settings(a.databaseUrl), quietSweeps);
  const owner = await channelOwner(a, '1004');
  let release!: () => void;
  llm.scriptChat({ text: 'Too late to count.', heldUntil: new Promise<void>((resolve) => (release = resolve)) }, { text: 'Answered once.' }, { text: 'And the second.' });
  const asked = llm.requests.length;
  const before = await balanceOf(a, owner.token);
  t.equal(await notify(a.origin, '1004', '+15557770004', 'Is anyone there?'), 200);
  await llm.received(asked + 1);
  // A's renewals failed for a whole lease: its inbox lapsed, though its turn is still running.
  await withClient(a.databaseUrl, (db) => db.query("UPDATE conversations SET inbox_until = now() - interval '1 second', inbox_owner = gen_random_uuid() WHERE customer_phone = '+15557770004'"));
  t.equal(await channelsOf(b).takeAbandoned(), 0, 'no sweep takes a conversation whose turn still runs');
  t.equal(await notify(b.origin, '1004', '+15557770004', 'Hello??'), 200, 'the customer writes again, to the other process, which takes the lapsed inbox');
  await channelsOf(b).idle();
  t.equal(llm.requests.length, asked + 1, 'but waits for the turn still running: it does not answer beside it');
  release();
  await channelsOf(a).idle();
  t.same(sentTo('+15557770004'), [], 'the overtaken reply is neither sent nor followed by an apology');
  t.equal(await channelsOf(b).takeAbandoned(), 1, 'the turn over, the conversation is taken up');
  await channelsOf(b).idle();
  t.same(sentTo('+15557770004'), ['Answered once.', 'And the second.']);
  t.same(
    await historyOf(b, owner.token, '+15557770004'),
    ['user: Is anyone there?', 'assistant: Answered once.', 'user: Hello??', 'assistant: And the second.'],
    'the history holds each once, in order',
  );
  t.equal(Math.round((before - (await balanceOf(b, owner.token))) * 100) / 100, 0.02, 'each charged once');
});

t.test('a stop while a tool call hangs ends, and the message is answered elsewhere', async (t) => {
  const site = await startSite(t);
  let answerTool!: () => void;
  const toolHeld = new Promise<void>((resolve) => (answerTool = resolve));
  t.teardown(() => answerTool());
  site.route('/slow', { type: 'application/json', body: '{"ok":true}', heldUntil: toolHeld });
  const a = await startTestPlatform(t, { ...settings(), outboundAllowPrivate: true }, quietSweeps);
  const b = await startTestPlatform(t, { ...settings(a.databaseUrl), outboundAllowPrivate: true }, quietSweeps);
  const owner = await channelOwner(a, '1005');
  const tool = await a.request('POST', '/user/tools', {
    token: owner.token,
    body: { name: 'slow_lookup', description: 'Looks slowly', endpoint: `${site.origin}/slow`, method: 'GET', timeout: 30, schema: [] },
  });
  t.equal(tool.status, 201);
  const assistantId = (await a.request('GET', '/user/assistants', { token: owner.token })).body.data[0].id as number;
  await a.request('PUT', `/user/assistant/${assistantId}`, { token: owner.token, body: { tool_ids: [tool.body.data.id] } });
  llm.scriptChat({ toolCalls: [{ name: 'slow_lookup', arguments: {} }] }, { text: 'Answered by the other process.' });
  const before = await balanceOf(a, owner.token);
  t.equal(await notify(a.origin, '1005', '+15557770005', 'Look it up'), 200);
  await site.requested('/slow');
  await a.platform.close({ graceMs: 0 });
  t.pass('the stop ended while the tool call still hung');
  t.equal(await channelsOf(b).takeAbandoned(), 1);
  await channelsOf(b).idle();
  t.same(sentTo('+15557770005'), ['Answered by the other process.']);
  t.same(await historyOf(b, owner.token, '+15557770005'), ['user: Look it up', 'assistant: Answered by the other process.'], 'the history holds it once');
  t.equal(Math.round((before - (await balanceOf(b, owner.token))) * 100) / 100, 0.01, 'charged once');
});

t.test('an inbox lost before the engine took the message: the late process stores nothing', async (t) => {
  const a = await startTestPlatform(t, settings(), quietSweeps);
  const b = await startTestPlatform(t, settings(a.databaseUrl), quietSweeps);
  const owner = await channelOwner(a, '1006');
  const customer = '+15557770006';
  const conversation = async () =>
    withClient(a.databaseUrl, async (db) => (await db.query('SELECT id::text FROM conversations WHERE customer_phone = $1', [customer])).rows[0]?.id as string | undefined);
  llm.scriptChat({ text: 'Hello there.' });
  t.equal(await notify(a.origin, '1006', customer, 'Hi'), 200);
  await channelsOf(a).idle();
  const id = (await conversation())!;
  const before = await balanceOf(a, owner.token);
  // A reply written elsewhere holds the conversation's turn: the next message waits for it in A's engine.
  await withClient(a.databaseUrl, (db) => db.query("UPDATE conversations SET turn_until = now() + interval '1 minute', turn_owner = gen_random_uuid() WHERE id = $1", [id]));
  const reads = graph.reads.length;
  llm.scriptChat({ text: 'Answered once.' }, { text: 'And the second.' });
  t.equal(await notify(a.origin, '1006', customer, 'First question'), 200);
  await graph.waitForReads(reads + 1);
  // A's lease lapses meanwhile (its renewals failing); the customer's next message reaches B, which takes the inbox.
  await withClient(a.databaseUrl, (db) => db.query("UPDATE conversations SET inbox_until = now() - interval '1 second', inbox_owner = gen_random_uuid() WHERE id = $1", [id]));
  t.equal(await notify(b.origin, '1006', customer, 'Second question'), 200);
  await graph.waitForReads(reads + 2);
  await withClient(a.databaseUrl, (db) => db.query('UPDATE conversations SET turn_until = NULL WHERE id = $1', [id]));
  await Promise.all([channelsOf(a).idle(), channelsOf(b).idle()]);
  t.same(sentTo(customer), ['Hello there.', 'Answered once.', 'And the second.']);
  t.same(
    await historyOf(b, owner.token, customer),
    ['user: Hi', 'assistant: Hello there.', 'user: First question', 'assistant: Answered once.', 'user: Second question', 'assistant: And the second.'],
    'each message held once, in order: the process that lost the inbox stored nothing',
  );
  t.equal(Math.round((before - (await balanceOf(b, owner.token))) * 100) / 100, 0.02, 'each charged once');
});
