/**
 * WhatsApp conversations through the Cloud API, with local fakes of the Graph API and of an
 * OpenAI-compatible model:
 * 1. Meta's verification handshake: the challenge echoed (as plain text, nosniff) for a channel's
 *    verify token; 403 for another token or mode.
 * 2. signatures: a notification signed with another secret, tampered with, unsigned, or naming no
 *    channel is 401 and keeps nothing; a signed errors report (no message, no status) is
 *    acknowledged; a message whose id holds U+0000 is skipped, never a 500.
 * 3. a text exchange with a tool call: the customer's message starts a `whatsapp` conversation,
 *    the reply (after the tool) goes to the customer through the Graph API, the message is marked
 *    read, `{{customer_phone}}` reaches the prompt, one message is charged; the listing shows it
 *    with the spec's fields, and the owner's history shows each message's delivery status.
 * 4. a notification retried by Meta (same message id, also at once) is answered once.
 * 5. statuses move a reply's delivery forward (sent, delivered, read), never back; failed is shown;
 *    a status that comes before its send is recorded is kept and applied once it is.
 * 6. within 24 hours the customer continues their conversation; after it, a new one starts.
 * 7. media: an image or a voice note with no transcriber gets a polite text-only answer, not
 *    charged; a tapped button is read as text; a voice note to an assistant whose transcriber is
 *    configured is downloaded from the Graph API, transcribed, and answered as text.
 * 8. a long reply leaves in parts within WhatsApp's limit, in order.
 * 9. AI off: the message is kept, not charged, not answered; the owner answers as a human agent
 *    (`POST /user/conversations/{id}/messages`) and the customer receives it.
 * 10. insufficient balance: one polite message per conversation, not charged, and the owner's
 *     `conversation.insufficient_balance` webhook; after a top-up the assistant answers again.
 * 11. the Graph API failing: a 5xx is retried; a 4xx fails the message, and the owner reads why
 *     (`delivery_error`).
 * 12. a reply the Graph API took is not sent again even when its id cannot be kept (another part
 *     already has it): it is recorded sent without it.
 * 13. a reaction is kept unanswered; a captioned photo is answered by its caption; a number on the
 *     owner's do-not-call list (a campaigns' list, which speaks for calls and SMS) is answered on
 *     WhatsApp; with no balance a voice note is not transcribed (the platform would pay for it).
 * 14. a channel's conversation is the owner's alone: whoever learns its id cannot read it, write in
 *     it or watch it (404, a socket closed with 4404); the owner is told to write as a human agent.
 */
import t from 'tap';
import WebSocket from 'ws';
import { startFakeOpenAi } from './fakes/openai.js';
import { startFakeTranscriber } from './fakes/transcribe.js';
import { mediaMessageWebhook, buttonReplyWebhook, signHub, startWhatsAppFake, statusWebhook, textMessageWebhook } from './fakes/whatsapp.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { jsonReceiver, startSite } from './helpers/site.js';

const PHONE_ID = '106540352242922';
const TOKEN = 'EAAG-test-access-token';
const APP_SECRET = 'test-app-secret';
const VERIFY = 'verify-token-abc';

const llm = await startFakeOpenAi(t);
const transcriber = await startFakeTranscriber(t, { openai: 'sk-transcribe' }, { anyAudio: true });
const graph = await startWhatsAppFake({ [PHONE_ID]: TOKEN });
t.teardown(() => graph.close());
const site = await startSite(t);
const hooks = jsonReceiver(site, '/hook');
const api = await startTestPlatform(t, {
  llmProviders: { openai: { baseUrl: llm.baseUrl, apiKey: 'sk-test' } },
  outboundAllowPrivate: true,
  channels: { whatsappApiUrl: graph.apiUrl, whatsappApiVersion: 'v21.0', secretsKey: undefined },
  speech: { openaiTranscribe: { url: transcriber.baseUrl, apiKey: 'sk-transcribe', model: 'whisper-1', mode: 'batch', realtimeUrl: `${transcriber.baseUrl.replace(/^http/, 'ws')}/realtime` } },
});
const owner = await api.user('Owner');
await api.credit(owner.id, 10);
const channels = api.platform.runtime.services.channels;
const sql = (text: string, values: unknown[] = []) => withClient(api.databaseUrl, (db) => db.query(text, values));
const balance = async () => (await api.request('GET', '/user', { token: owner.token })).body.data.balance as number;

const assistant = await api.assistant(owner.token, {
  system_prompt: 'You answer {{customer_phone}} for Acme.',
  initial_message: 'Hi! This greeting is for the widget only.',
  webhook_url: `${site.origin}/hook`,
  is_webhook_active: true,
});
const created = await api.request('POST', '/user/channels', {
  token: owner.token,
  body: { type: 'whatsapp', assistant_id: assistant.id, phone_number_id: PHONE_ID, access_token: TOKEN, app_secret: APP_SECRET, verify_token: VERIFY },
});
t.equal(created.status, 201);

let counter = 0;
const nextId = () => `wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA${++counter}`;

/** Posts a notification as Meta does: the exact bytes, signed with `secret`. */
async function notify(body: unknown, secret: string | null = APP_SECRET, raw = JSON.stringify(body)) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (secret !== null) headers['x-hub-signature-256'] = signHub(secret, raw);
  return api.request('POST', '/channels/whatsapp/webhook', { raw, headers });
}
/** A customer writes; resolves once this process answered and sent everything. */
async function write(from: string, text: string, id = nextId()) {
  const res = await notify(textMessageWebhook({ phoneNumberId: PHONE_ID, from, id, text, name: 'Ada' }));
  t.equal(res.status, 200);
  await channels.idle();
  return id;
}
const conversationsOf = async (customer: string) =>
  (await sql('SELECT id::text FROM conversations WHERE customer_phone = $1 ORDER BY created_at', [customer])).rows.map((row) => row.id as string);
const history = async (id: string) => (await api.request('GET', `/conversations/${id}`, { token: owner.token })).body.history;
const sentTo = (customer: string) => graph.sent.filter((s) => s.to === customer.replace('+', '')).map((s) => s.text);

t.test("Meta's verification handshake", async (t) => {
  const verify = (query: string) => api.request('GET', `/channels/whatsapp/webhook?${query}`);
  const ok = await verify(`hub.mode=subscribe&hub.verify_token=${VERIFY}&hub.challenge=1158201444`);
  t.equal(ok.status, 200);
  t.equal(ok.body, '1158201444');
  t.equal(ok.headers.get('x-content-type-options'), 'nosniff', 'the echo is plain text no browser takes for a page');
  t.equal((await verify('hub.mode=subscribe&hub.verify_token=wrong-token&hub.challenge=1')).status, 403);
  t.equal((await verify(`hub.mode=unsubscribe&hub.verify_token=${VERIFY}&hub.challenge=1`)).status, 403);
  t.equal((await verify('')).status, 403);
});

t.test('a notification not signed by the channel is refused and keeps nothing', async (t) => {
  const body = textMessageWebhook({ phoneNumberId: PHONE_ID, from: '+15550001111', id: nextId(), text: 'hello' });
  const raw = JSON.stringify(body);
  for (const [what, res] of [
    ['another secret', await notify(body, 'not-the-secret')],
    ['no signature', await notify(body, null)],
    ['tampered', await api.request('POST', '/channels/whatsapp/webhook', { raw: raw.replace('hello', 'hellp'), headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHub(APP_SECRET, raw) } })],
    ['no channel', await notify(textMessageWebhook({ phoneNumberId: '999', from: '+15550001111', id: nextId(), text: 'hi' }))],
  ] as const) {
    t.equal(res.status, 401, what);
    t.same(res.body, { message: 'The request signature is not valid.' }, what);
  }
  const errorsOnly = { object: 'whatsapp_business_account', entry: [{ id: '1', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550783881', phone_number_id: PHONE_ID }, errors: [{ code: 131051, title: 'Message type unknown' }] } }] }] };
  t.equal((await notify(errorsOnly, 'not-the-secret')).status, 401, "an errors report is checked against the channel's secret too");
  t.equal((await notify(errorsOnly)).status, 200, 'and acknowledged when signed (Meta would retry it otherwise)');
  const nul = JSON.stringify(textMessageWebhook({ phoneNumberId: PHONE_ID, from: '+15550001111', id: 'wamid.\u0000', text: 'hello' }));
  const withNul = await notify(undefined, APP_SECRET, nul);
  t.equal(withNul.status, 200, 'a message whose id holds U+0000 is skipped as malformed, not a server error');
  const malformed = await api.request('POST', '/channels/whatsapp/webhook', { raw: 'nope', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHub(APP_SECRET, 'nope') } });
  t.equal(malformed.status, 400, 'a body that is not JSON');
  t.same(await conversationsOf('+15550001111'), [], 'nothing was kept');
});

t.test('a text exchange with a tool call', async (t) => {
  const calls: string[] = [];
  site.route('/orders', (req) => {
    calls.push(req.url ?? '');
    return { type: 'application/json', body: JSON.stringify({ order: 'A-17', status: 'shipped' }) };
  });
  const tool = await api.request('POST', '/user/tools', {
    token: owner.token,
    body: { name: 'check_order', description: 'Look up an order', endpoint: `${site.origin}/orders`, method: 'GET', schema: [{ name: 'order_id', type: 'string', description: 'Order number' }] },
  });
  await api.request('PUT', `/user/assistant/${assistant.id}`, { token: owner.token, body: { tool_ids: [tool.body.data.id] } });
  llm.scriptChat({ toolCalls: [{ name: 'check_order', arguments: { order_id: 'A-17' } }] }, { text: 'Your order A-17 has shipped.' });
  const before = await balance();
  const id = await write('+15551230001', 'Where is order A-17?');

  t.same(sentTo('+15551230001'), ['Your order A-17 has shipped.'], 'the reply went to the customer, no greeting before it');
  t.same(calls, ['/orders?order_id=A-17']);
  t.match(llm.requests.at(-2)!.body.messages[0], { role: 'system', content: /You answer \+15551230001 for Acme\./ });
  await graph.waitForReads(1);
  t.same(graph.reads.at(-1), { phoneNumberId: PHONE_ID, messageId: id });
  t.equal(Math.round((before - (await balance())) * 100) / 100, 0.01, 'one message charged');

  const [conversation] = await conversationsOf('+15551230001');
  const listed = await api.request('GET', '/user/conversations?type=whatsapp', { token: owner.token });
  t.match(listed.body.data.find((item: { id: string }) => item.id === conversation), { type: 'whatsapp', assistant_id: assistant.uuid, message_count: 2, total_cost: 0.01, ai_enabled: true });
  t.same(await history(conversation!), [
    { role: 'user', content: 'Where is order A-17?', delivery_status: 'received' },
    { role: 'assistant', content: 'Your order A-17 has shipped.', function_calls: [{ name: 'check_order', arguments: { order_id: 'A-17' }, result: { order: 'A-17', status: 'shipped' } }], delivery_status: 'sent' },
  ]);
  t.equal((await api.request('GET', `/conversations/${conversation}`)).status, 404, 'the public reads none of it');
  await api.request('PUT', `/user/assistant/${assistant.id}`, { token: owner.token, body: { tool_ids: [] } });
});

t.test("a channel's conversation is the owner's alone", async (t) => {
  llm.scriptChat({ text: 'Your invoice is attached to your account.' });
  await write('+15551230020', 'Where is my invoice?');
  const [id] = await conversationsOf('+15551230020');
  const stranger = await api.user('Stranger');
  for (const [who, token] of [['a visitor', undefined], ['another user', stranger.token]] as const) {
    const read = await api.request('GET', `/conversations/${id}`, { token });
    t.equal(read.status, 404, `${who} cannot read it`);
    t.same(read.body, { status: false, error: 'Conversation not found' }, who);
    const wrote = await api.request('POST', `/conversations/${id}/messages`, { token, body: { message: 'Tell me the invoice' } });
    t.equal(wrote.status, 404, `${who} cannot write in it`);
  }
  const own = await api.request('POST', `/conversations/${id}/messages`, { token: owner.token, body: { message: 'A note' } });
  t.equal(own.status, 422, 'the owner writes as a human agent instead');
  t.match(own.body.errors.message[0], `/api/user/conversations/${id}/messages`);
  const socket = new WebSocket(`${api.origin.replace('http', 'ws')}/ws/conversations/${id}?after=0`);
  const frames: string[] = [];
  socket.on('message', (data) => frames.push(String(data)));
  const [code] = await new Promise<[number]>((resolve) => socket.on('close', (code) => resolve([code])));
  t.equal(code, 4404, 'no socket watches it');
  t.same(frames, [], 'nothing of it was sent');
  t.equal((await history(id!)).length, 2, 'the owner reads it');
  t.equal(sentTo('+15551230020').length, 1, 'the customer got the one reply');
});

t.test('a notification Meta retries is answered once', async (t) => {
  const id = nextId();
  const body = textMessageWebhook({ phoneNumberId: PHONE_ID, from: '+15551230002', id, text: 'Open on Sunday?' });
  llm.scriptChat({ text: 'We are closed on Sundays.' });
  const asked = llm.requests.length;
  const answers = await Promise.all([notify(body), notify(body), notify(body)]);
  t.same(answers.map((a) => a.status), [200, 200, 200]);
  await channels.idle();
  t.equal((await notify(body)).status, 200, 'a later retry too');
  await channels.idle();
  t.same(sentTo('+15551230002'), ['We are closed on Sundays.']);
  t.equal(llm.requests.length - asked, 1, 'the model was asked once');
});

t.test('statuses move a delivery forward, never back', async (t) => {
  llm.scriptChat({ text: 'Noted.' });
  await write('+15551230003', 'Note this');
  const [conversation] = await conversationsOf('+15551230003');
  const wamid = graph.sent.at(-1)!.id;
  const status = async (s: string) => t.equal((await notify(statusWebhook({ phoneNumberId: PHONE_ID, id: wamid, status: s, recipient: '+15551230003' }))).status, 200);
  const last = async () => (await history(conversation!)).at(-1).delivery_status;
  await status('delivered');
  t.equal(await last(), 'delivered');
  await status('read');
  t.equal(await last(), 'read');
  await status('delivered');
  t.equal(await last(), 'read', 'a late delivered does not move it back');
  await status('failed');
  t.equal(await last(), 'failed');
  t.equal((await notify(statusWebhook({ phoneNumberId: PHONE_ID, id: 'wamid.unknown', status: 'read', recipient: '+15551230003' }))).status, 200, "another system's status is acknowledged and ignored");
});

t.test('a status that outruns the record of its send is applied once the send is recorded', async (t) => {
  // The fake numbers its ids in order: the next reply will be wamid.<n + 1>.
  const next = `wamid.${Number(graph.sent.at(-1)!.id.split('.')[1]) + 1}`;
  t.equal((await notify(statusWebhook({ phoneNumberId: PHONE_ID, id: next, status: 'delivered', recipient: '+15551230021' }))).status, 200);
  t.equal((await sql('SELECT count(*)::int AS n FROM channel_early_statuses WHERE external_id = $1', [next])).rows[0].n, 1, 'kept while no part has the id');
  llm.scriptChat({ text: 'On its way.' });
  await write('+15551230021', 'Is it sent?');
  t.equal(graph.sent.at(-1)!.id, next);
  const [conversation] = await conversationsOf('+15551230021');
  t.equal((await history(conversation!)).at(-1).delivery_status, 'delivered', 'the early report moved the reply forward');
  t.equal((await sql('SELECT count(*)::int AS n FROM channel_early_statuses WHERE external_id = $1', [next])).rows[0].n, 0, 'and was used up');
  await sql("UPDATE channel_early_statuses SET received_at = now() - interval '11 minutes'");
  await notify(statusWebhook({ phoneNumberId: PHONE_ID, id: 'wamid.someone-elses', status: 'read', recipient: '+15551230021' }));
  t.same((await sql('SELECT external_id FROM channel_early_statuses')).rows, [{ external_id: 'wamid.someone-elses' }], 'reports never matched are dropped after ten minutes');
});

t.test('the 24-hour window', async (t) => {
  await write('+15551230004', 'First');
  await write('+15551230004', 'Second, an hour later');
  t.equal((await conversationsOf('+15551230004')).length, 1, 'within 24 hours, one conversation');
  await sql("UPDATE conversations SET last_customer_at = now() - interval '25 hours' WHERE customer_phone = $1", ['+15551230004']);
  await write('+15551230004', 'A day later');
  const [first, second] = await conversationsOf('+15551230004');
  t.ok(second, 'after 24 hours, a new conversation');
  t.equal((await history(second!)).length, 2);
  t.equal((await history(first!)).length, 4);
});

t.test('media and buttons', async (t) => {
  const before = await balance();
  const asked = llm.requests.length;
  await notify(mediaMessageWebhook({ phoneNumberId: PHONE_ID, from: '+15551230005', id: nextId(), kind: 'image' }));
  await notify(mediaMessageWebhook({ phoneNumberId: PHONE_ID, from: '+15551230005', id: nextId(), kind: 'audio' }));
  await notify(mediaMessageWebhook({ phoneNumberId: PHONE_ID, from: '+15551230005', id: nextId(), kind: 'location' }));
  await channels.idle();
  const notice = 'I can only read text messages. Please write your message as text.';
  t.same(sentTo('+15551230005'), [notice, notice, notice]);
  t.equal(llm.requests.length, asked, 'the model was not asked');
  t.equal(await balance(), before, 'nothing charged');
  const [conversation] = await conversationsOf('+15551230005');
  t.same((await history(conversation!)).slice(0, 2).map((m: { content: string }) => m.content), ['[image]', notice]);

  llm.scriptChat({ text: 'Booked for Tuesday.' });
  await notify(buttonReplyWebhook({ phoneNumberId: PHONE_ID, from: '+15551230005', id: nextId(), title: 'Tuesday' }));
  await channels.idle();
  t.equal(llm.requests.at(-1)!.body.messages.at(-1).content, 'Tuesday', 'the tapped button is read as text');
  t.equal(sentTo('+15551230005').at(-1), 'Booked for Tuesday.');
});

t.test('a voice note is transcribed by the assistant\'s transcriber and answered', async (t) => {
  const listener = await api.assistant(owner.token, { name: 'Listener', transcriber_provider_id: 12 });
  graph.token('2002', TOKEN);
  const channel = await api.request('POST', '/user/channels', {
    token: owner.token,
    body: { type: 'whatsapp', assistant_id: listener.id, phone_number_id: '2002', access_token: TOKEN, app_secret: APP_SECRET, verify_token: 'verify-token-listener' },
  });
  t.equal(channel.status, 201);
  const note = Buffer.concat([Buffer.from('OggS'), Buffer.alloc(3_000, 7)]);
  graph.media('media-voice-1', note, 'audio/ogg; codecs=opus');
  transcriber.utterances.push('What time do you open tomorrow?');
  llm.scriptChat({ text: 'We open at nine.' });
  await notify(mediaMessageWebhook({ phoneNumberId: '2002', from: '+15551230010', id: nextId(), kind: 'audio', mediaId: 'media-voice-1' }));
  await channels.idle();
  t.same(transcriber.files.at(-1)!.file.bytes, note, 'the voice note reached the transcriber as it came');
  t.equal(llm.requests.at(-1)!.body.messages.at(-1).content, 'What time do you open tomorrow?');
  t.same(graph.sent.filter((s) => s.phoneNumberId === '2002').map((s) => s.text), ['We open at nine.']);
  const [conversation] = await conversationsOf('+15551230010');
  t.same((await history(conversation!)).map((m: { content: string }) => m.content), ['What time do you open tomorrow?', 'We open at nine.']);
});

t.test('a long reply leaves in parts, in order', async (t) => {
  const paragraph = 'word '.repeat(700).trim();
  llm.scriptChat({ text: `${paragraph}\n\n${paragraph}` });
  await write('+15551230006', 'Tell me everything');
  const parts = sentTo('+15551230006');
  t.equal(parts.length, 2);
  t.ok(parts.every((part) => part.length <= 4096));
  t.same(parts, [paragraph, paragraph]);
});

t.test('AI off: kept for the owner, who answers as a human agent', async (t) => {
  await write('+15551230007', 'Hello?');
  const [conversation] = await conversationsOf('+15551230007');
  await api.request('PATCH', `/user/conversations/${conversation}`, { token: owner.token, body: { ai_enabled: false } });
  const before = await balance();
  const asked = llm.requests.length;
  await write('+15551230007', 'Can a person help me?');
  t.equal(llm.requests.length, asked, 'the model was not asked');
  t.equal(await balance(), before, 'not charged');
  t.equal(sentTo('+15551230007').length, 1, 'no reply beyond the first');

  const res = await api.request('POST', `/user/conversations/${conversation}/messages`, { token: owner.token, body: { message: 'Hi, Sam here. How can I help?' } });
  t.equal(res.status, 201);
  t.match(res.body, { status: true, message: 'Message sent.', data: { id: Number, role: 'assistant', content: 'Hi, Sam here. How can I help?', delivery_status: 'pending' } });
  await channels.idle();
  t.equal(sentTo('+15551230007').at(-1), 'Hi, Sam here. How can I help?');
  t.same((await history(conversation!)).slice(-2), [
    { role: 'user', content: 'Can a person help me?', delivery_status: 'received' },
    { role: 'assistant', content: 'Hi, Sam here. How can I help?', delivery_status: 'sent' },
  ]);
  const stranger = await api.user('Stranger');
  t.equal((await api.request('POST', `/user/conversations/${conversation}/messages`, { token: stranger.token, body: { message: 'x' } })).status, 404);
  t.equal((await api.request('POST', `/user/conversations/${conversation}/messages`, { token: owner.token, body: { message: '' } })).status, 422);
});

t.test('insufficient balance: one polite message per conversation and a webhook', async (t) => {
  await write('+15551230008', 'Hi');
  const [conversation] = await conversationsOf('+15551230008');
  await sql("INSERT INTO ledger_entries (user_id, amount, kind, reason) SELECT $1, -balance, 'adjustment', 'test' FROM users WHERE id = $1", [owner.id]);
  t.equal(await balance(), 0, 'the balance is spent');
  const asked = llm.requests.length;
  await write('+15551230008', 'Are you there?');
  await write('+15551230008', 'Hello??');
  const notice = "Sorry, we can't answer messages right now. Please try again later.";
  t.same(sentTo('+15551230008').slice(1), [notice], 'one notice for the conversation');
  t.equal(llm.requests.length, asked);
  await api.platform.runtime.settled();
  await site.requested('/hook');
  t.match(hooks.find((hook) => hook.event === 'conversation.insufficient_balance'), { event: 'conversation.insufficient_balance', conversation_id: conversation, assistant_id: assistant.id, channel: 'whatsapp', customer_phone: '+15551230008' });

  await api.credit(owner.id, 5);
  llm.scriptChat({ text: 'Yes, here now.' });
  await write('+15551230008', 'Now?');
  t.equal(sentTo('+15551230008').at(-1), 'Yes, here now.');
});

t.test('the Graph API failing: retried when it may pass, failed when it will not', async (t) => {
  graph.failSends(1, 503);
  llm.scriptChat({ text: 'After a retry.' });
  await write('+15551230009', 'Retry me');
  // The first attempt failed; the retry waits for its delay (2 s) on the platform's clock.
  await graph.waitForSent(graph.sent.length + 1);
  await channels.idle();
  t.equal(sentTo('+15551230009').at(-1), 'After a retry.');

  graph.failSends(1, 400);
  llm.scriptChat({ text: 'Never sent.' });
  await write('+15551230009', 'Fail me');
  const [conversation] = await conversationsOf('+15551230009');
  t.match((await history(conversation!)).at(-1), { delivery_status: 'failed', delivery_error: /^The WhatsApp Cloud API refused the request \(HTTP 400: \(#100\) Invalid parameter\)/ }, 'the owner reads why');
  t.notOk('delivery_error' in (await history(conversation!)).at(-2), 'only a failed reply says why');
  t.equal((await api.request('GET', `/conversations/${conversation}`)).status, 404, 'the public reads nothing of it');
});

t.test('a reply the Graph API took is never sent again, even when its id cannot be kept', async (t) => {
  await write('+15551230011', 'First');
  const [conversation] = await conversationsOf('+15551230011');
  // The next id the Graph API gives is already another part's (as after a vendor-side id reuse).
  const nextWamid = `wamid.${graph.sent.length + 1}`;
  await sql("UPDATE channel_outbound SET external_id = $1 WHERE conversation_id = $2", [nextWamid, conversation]);
  llm.scriptChat({ text: 'Only once.' });
  await write('+15551230011', 'Second');
  t.same(sentTo('+15551230011').filter((text) => text === 'Only once.'), ['Only once.'], 'sent once');
  t.equal((await history(conversation!)).at(-1).delivery_status, 'sent');
});

t.test('reactions, captions, the do-not-call list and voice notes without balance', async (t) => {
  const asked = llm.requests.length;
  const reaction = { object: 'whatsapp_business_account', entry: [{ id: '1', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550783881', phone_number_id: PHONE_ID }, contacts: [{ profile: { name: 'Ada' }, wa_id: '15551230012' }], messages: [{ from: '15551230012', id: nextId(), timestamp: '1764000000', type: 'reaction', reaction: { message_id: 'wamid.x', emoji: '\u{1F44D}' } }] } }] }] };
  t.equal((await notify(reaction)).status, 200);
  await channels.idle();
  t.same(sentTo('+15551230012'), [], 'a reaction asks nothing');
  t.equal(llm.requests.length, asked);

  llm.scriptChat({ text: 'Yes, we stock that part.' });
  await notify(mediaMessageWebhook({ phoneNumberId: PHONE_ID, from: '+15551230012', id: nextId(), kind: 'image', caption: 'Do you have this part?' }));
  await channels.idle();
  t.equal(llm.requests.at(-1)!.body.messages.at(-1).content, '[image] Do you have this part?');
  t.same(sentTo('+15551230012'), ['Yes, we stock that part.']);

  await api.request('POST', '/user/do-not-call', { token: owner.token, body: { phone_number: '+15551230012' } });
  llm.scriptChat({ text: 'Still here.' });
  await write('+15551230012', 'Hello again');
  t.equal(sentTo('+15551230012').at(-1), 'Still here.');

  await sql("INSERT INTO ledger_entries (user_id, amount, kind, reason) SELECT $1, -balance, 'adjustment', 'test' FROM users WHERE id = $1", [owner.id]);
  const listener = (await api.request('GET', '/user/channels', { token: owner.token })).body.data.find((c: { phone_number_id: string }) => c.phone_number_id === '2002');
  t.ok(listener, 'the voice channel of an earlier test');
  const transcribed = transcriber.files.length;
  await notify(mediaMessageWebhook({ phoneNumberId: '2002', from: '+15551230013', id: nextId(), kind: 'audio', mediaId: 'media-voice-1' }));
  await channels.idle();
  t.equal(transcriber.files.length, transcribed, 'not transcribed');
  t.same(graph.sent.filter((s) => s.to === '15551230013').map((s) => s.text), ["Sorry, we can't answer messages right now. Please try again later."]);
  await api.credit(owner.id, 5);
});
