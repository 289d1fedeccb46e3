/**
 * SMS conversations through Twilio Messaging, with local fakes of the Messages API and of an
 * OpenAI-compatible model:
 * 1. signatures: an incoming SMS or a status callback unsigned, signed with another token, for
 *    another URL or tampered with is 403 and keeps nothing.
 * 2. a text exchange: the customer's SMS starts an `sms` conversation (listed with the spec's
 *    fields); the webhook answers empty TwiML; the reply goes with the Messages API from the
 *    channel's number to the customer, with the status callback; `{{customer_phone}}` reaches the
 *    prompt; one message is charged.
 * 3. an SMS Twilio retries (same MessageSid, also at once) is answered once.
 * 4. STOP puts the number on the owner's do-not-call list, unanswered and not charged; later
 *    messages get no reply and the owner's human reply is not sent (failed); START takes it off,
 *    unanswered, and the next message is answered. "Yes" from a customer who never opted out is
 *    answered as ordinary words.
 * 5. status callbacks: delivered and undelivered are shown on the reply; one for a sid this
 *    platform did not send is acknowledged and ignored.
 * 6. a long reply leaves as several messages within 1,600 characters, in order.
 * 7. an SMS to a number with no channel, or with a field holding U+0000: empty TwiML, nothing kept.
 * 8. an MMS without text: the polite text-only answer, not charged.
 * 9. a send Twilio refuses because the customer opted out with it (21610) fails, and puts the
 *    number on the owner's do-not-call list.
 * 10. a number whose rent lapsed unpaid answers nothing (kept, not charged) until it is paid again.
 */
import t from 'tap';
import { startFakeOpenAi } from './fakes/openai.js';
import { inboundSmsForm, signTwilio, startTwilioMessagingFake, statusCallbackForm } from './fakes/twilioMessaging.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const llm = await startFakeOpenAi(t);
const twilio = await startTwilioMessagingFake();
t.teardown(() => twilio.close());
const api = await startTestPlatform(t, {
  llmProviders: { openai: { baseUrl: llm.baseUrl, apiKey: 'sk-test' } },
  twilio: { accountSid: twilio.accountSid, authToken: twilio.authToken, apiUrl: twilio.apiUrl },
  twilioAuthToken: twilio.authToken,
});
const owner = await api.user('Owner');
await api.credit(owner.id, 20);
const channels = api.platform.runtime.services.channels;
const sql = (text: string, values: unknown[] = []) => withClient(api.databaseUrl, (db) => db.query(text, values));
const balance = async () => (await api.request('GET', '/user', { token: owner.token })).body.data.balance as number;

const assistant = await api.assistant(owner.token, { system_prompt: 'You text {{customer_phone}} for Acme.', initial_message: 'Hi! This greeting is for the widget only.' });
const number = await api.phoneNumber(owner.token);
await sql('UPDATE phone_numbers SET sms_capable = true WHERE id = $1', [number.id]);
const created = await api.request('POST', '/user/channels', { token: owner.token, body: { type: 'sms', assistant_id: assistant.id, phone_number_id: number.id } });
t.equal(created.status, 201);
const CHANNEL_NUMBER = number.number;

const SMS_URL = `${api.origin}/api/channels/twilio/sms`;
const STATUS_URL = `${SMS_URL}/status`;
const FORM = 'application/x-www-form-urlencoded';
const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>';

/** Posts a form as Twilio does, signed over `signedUrl` with `token` (null: unsigned). */
function post(path: '/channels/twilio/sms' | '/channels/twilio/sms/status', form: URLSearchParams, token: string | null = twilio.authToken, signedUrl = `${api.origin}/api${path}`, signed = form) {
  const headers: Record<string, string> = { 'content-type': FORM };
  if (token !== null) headers['x-twilio-signature'] = signTwilio(token, signedUrl, signed);
  return api.request('POST', path, { raw: form.toString(), headers });
}
const smsForm = (from: string, body: string, extra: Partial<Parameters<typeof inboundSmsForm>[0]> = {}) =>
  inboundSmsForm({ from, to: CHANNEL_NUMBER, body, accountSid: twilio.accountSid, ...extra });
/** A customer texts; resolves once this process answered and sent everything. */
async function text(from: string, body: string, extra: Partial<Parameters<typeof inboundSmsForm>[0]> = {}) {
  const res = await post('/channels/twilio/sms', smsForm(from, body, extra));
  if (res.status !== 200) throw new Error(`the SMS webhook answered ${res.status}`);
  await channels.idle();
  return res;
}
/** Twilio reports on a message sent from the channel's number. */
const status = (message: { sid: string; to: string }, value: string, errorCode?: number) =>
  post('/channels/twilio/sms/status', statusCallbackForm({ sid: message.sid, status: value, to: message.to, from: CHANNEL_NUMBER, accountSid: twilio.accountSid, ...(errorCode === undefined ? {} : { errorCode }) }));
const conversationsOf = async (customer: string) =>
  (await sql('SELECT id::text FROM conversations WHERE customer_phone = $1 ORDER BY created_at', [customer])).rows.map((row) => row.id as string);
const history = async (id: string) => (await api.request('GET', `/conversations/${id}`, { token: owner.token })).body.history;
const sentTo = (customer: string) => twilio.sent.filter((s) => s.to === customer).map((s) => s.body);
const inboundCount = async () => Number((await sql('SELECT count(*) AS n FROM channel_inbound')).rows[0].n);
const spent = async (before: number) => Math.round((before - (await balance())) * 100) / 100;

t.test('a webhook not signed with the Twilio auth token is refused and keeps nothing', async (t) => {
  const customer = '+15552220001';
  const form = smsForm(customer, 'hello');
  for (const [what, res] of [
    ['no signature', await post('/channels/twilio/sms', form, null)],
    ['another token', await post('/channels/twilio/sms', form, 'not-the-auth-token')],
    ['another URL', await post('/channels/twilio/sms', form, twilio.authToken, `${api.origin}/api/channels/twilio/other`)],
    ['tampered', await post('/channels/twilio/sms', form, twilio.authToken, SMS_URL, smsForm(customer, 'hellp', { sid: form.get('MessageSid')! }))],
  ] as const) {
    t.equal(res.status, 403, what);
    t.same(res.body, { message: 'The Twilio signature does not match.' }, what);
  }
  t.equal((await post('/channels/twilio/sms/status', statusCallbackForm({ sid: 'SM' + '1'.repeat(32), status: 'delivered', to: customer, from: CHANNEL_NUMBER }), null)).status, 403, 'a status callback alike');
  await channels.idle();
  t.same(await conversationsOf(customer), [], 'nothing was kept');
  t.equal(await inboundCount(), 0);
  t.equal(twilio.requests.length, 0, 'nothing was sent');
});

t.test('a text exchange', async (t) => {
  const customer = '+15552220002';
  llm.scriptChat({ text: 'We open at 9am.' });
  const before = await balance();
  const res = await text(customer, 'When do you open?');
  t.match(res.headers.get('content-type'), /^text\/xml/);
  t.equal(res.body, EMPTY_TWIML, 'the webhook answers empty TwiML: the reply goes through the API');

  t.same(
    twilio.sent.filter((s) => s.to === customer).map(({ from, to, body, statusCallback }) => ({ from, to, body, statusCallback })),
    [{ from: CHANNEL_NUMBER, to: customer, body: 'We open at 9am.', statusCallback: STATUS_URL }],
    'one reply from the channel number, no greeting before it',
  );
  t.equal(twilio.requests.at(-1)!.authorization, `Basic ${Buffer.from(`${twilio.accountSid}:${twilio.authToken}`).toString('base64')}`);
  t.match(llm.requests.at(-1)!.body.messages[0], { role: 'system', content: /You text \+15552220002 for Acme\./ });
  t.equal(llm.requests.at(-1)!.body.messages.at(-1).content, 'When do you open?');
  t.equal(await spent(before), 0.01, 'one message charged');

  const [conversation] = await conversationsOf(customer);
  const listed = await api.request('GET', '/user/conversations?type=sms', { token: owner.token });
  t.equal(listed.status, 200);
  const item = listed.body.data.find((row: { id: string }) => row.id === conversation);
  t.same(Object.keys(item).sort(), ['ai_enabled', 'assistant_id', 'assistant_name', 'created_at', 'id', 'message_count', 'total_cost', 'type', 'updated_at']);
  t.match(item, { type: 'sms', assistant_id: assistant.uuid, assistant_name: 'Bot', message_count: 2, total_cost: 0.01, ai_enabled: true, created_at: String, updated_at: String });
  t.notOk(
    (await api.request('GET', '/user/conversations?type=whatsapp', { token: owner.token })).body.data.some((row: { id: string }) => row.id === conversation),
    'not listed as whatsapp',
  );
  t.same(await history(conversation!), [
    { role: 'user', content: 'When do you open?', delivery_status: 'received' },
    { role: 'assistant', content: 'We open at 9am.', delivery_status: 'sent' },
  ]);
});

t.test('an SMS Twilio retries is answered once', async (t) => {
  const customer = '+15552220003';
  const form = smsForm(customer, 'Open on Sunday?');
  llm.scriptChat({ text: 'We are closed on Sundays.' });
  const asked = llm.requests.length;
  const before = await balance();
  const answers = await Promise.all([0, 1, 2].map(() => post('/channels/twilio/sms', form)));
  t.same(answers.map((a) => [a.status, a.body]), [[200, EMPTY_TWIML], [200, EMPTY_TWIML], [200, EMPTY_TWIML]]);
  await channels.idle();
  t.equal((await post('/channels/twilio/sms', form)).status, 200, 'a later retry too');
  await channels.idle();
  t.same(sentTo(customer), ['We are closed on Sundays.']);
  t.equal(llm.requests.length - asked, 1, 'the model was asked once');
  t.equal(await spent(before), 0.01, 'charged once');
  t.equal((await history((await conversationsOf(customer))[0]!)).length, 2);
});

t.test('STOP and START', async (t) => {
  const customer = '+15552220004';
  const onList = async () =>
    (await api.request('GET', '/user/do-not-call', { token: owner.token })).body.data.some((entry: { phone_number: string }) => entry.phone_number === customer);
  llm.scriptChat({ text: 'Hello there.' });
  await text(customer, 'Hello');
  t.same(sentTo(customer), ['Hello there.']);
  const [conversation] = await conversationsOf(customer);

  const before = await balance();
  const asked = llm.requests.length;
  const requests = twilio.requests.length;
  await text(customer, 'Stop');
  t.ok(await onList(), "STOP puts the number on the owner's do-not-call list");
  await text(customer, 'Are you still there?');
  t.equal(llm.requests.length, asked, 'the model was not asked');
  t.equal(twilio.requests.length, requests, 'no reply to STOP nor after it');
  t.equal(await balance(), before, 'not charged');

  const human = await api.request('POST', `/user/conversations/${conversation}/messages`, { token: owner.token, body: { message: 'Sam here, one last thing.' } });
  t.equal(human.status, 201);
  t.match(human.body.data, { role: 'assistant', content: 'Sam here, one last thing.', delivery_status: 'pending' });
  await channels.idle();
  t.equal(twilio.requests.length, requests, "the owner's reply is not sent to a customer who opted out");
  t.same((await history(conversation!)).slice(-3), [
    { role: 'user', content: 'Stop', delivery_status: 'received' },
    { role: 'user', content: 'Are you still there?', delivery_status: 'received' },
    { role: 'assistant', content: 'Sam here, one last thing.', delivery_status: 'failed', delivery_error: 'Not sent: the customer opted out (STOP)' },
  ]);

  await text(customer, 'START');
  t.notOk(await onList(), 'START takes the number off the list');
  t.equal(twilio.requests.length, requests, 'START itself gets no reply');
  t.equal(llm.requests.length, asked);
  t.equal(await balance(), before, 'START is not charged');
  llm.scriptChat({ text: 'Welcome back.' });
  await text(customer, 'I am back');
  t.equal(sentTo(customer).at(-1), 'Welcome back.', 'the next message is answered');
  t.equal(await spent(before), 0.01);

  const stranger = '+15552220014';
  llm.scriptChat({ text: 'Great, booked for Tuesday.' });
  await text(stranger, 'Yes');
  t.equal(llm.requests.at(-1)!.body.messages.at(-1).content, 'Yes', '"Yes" from a customer who never opted out reaches the assistant');
  t.same(sentTo(stranger), ['Great, booked for Tuesday.']);
});

t.test('status callbacks show on the reply', async (t) => {
  const customer = '+15552220005';
  llm.scriptChat({ text: 'Noted.' }, { text: 'Also noted.' });
  await text(customer, 'Note this');
  await text(customer, 'And this');
  const [conversation] = await conversationsOf(customer);
  const [first, second] = twilio.sent.filter((s) => s.to === customer);
  const statuses = async () => (await history(conversation!)).filter((m: { role: string }) => m.role === 'assistant').map((m: { delivery_status: string }) => m.delivery_status);
  t.same(await statuses(), ['sent', 'sent']);

  for (const value of ['sent', 'delivered']) {
    const res = await status(first!, value);
    t.same([res.status, res.body], [200, EMPTY_TWIML]);
  }
  t.same(await statuses(), ['delivered', 'sent'], 'delivered');
  t.equal((await status(second!, 'undelivered', 30003)).status, 200);
  t.same(await statuses(), ['delivered', 'failed'], 'undelivered is failed');
  t.equal((await status(first!, 'sent')).status, 200);
  t.same(await statuses(), ['delivered', 'failed'], 'a late sent does not move it back');

  const unknown = await status({ sid: 'SM' + 'f'.repeat(32), to: customer }, 'delivered');
  t.same([unknown.status, unknown.body], [200, EMPTY_TWIML], "another system's status is acknowledged");
  t.same(await statuses(), ['delivered', 'failed'], 'and ignored');
});

t.test('a long reply leaves as several messages, in order', async (t) => {
  const customer = '+15552220006';
  const paragraphs = ['alpha', 'bravo', 'charlie'].map((word) => `${word} `.repeat(1000 / word.length).trim());
  llm.scriptChat({ text: paragraphs.join('\n\n') });
  const before = await balance();
  await text(customer, 'Tell me everything');
  const parts = sentTo(customer);
  t.same(parts, paragraphs, 'cut at the paragraphs, sent in order');
  t.ok(parts.every((part) => [...part].length <= 1600), 'each within 1,600 characters');
  t.equal(await spent(before), 0.01, 'one message charged');
  const [conversation] = await conversationsOf(customer);
  t.same((await history(conversation!)).at(-1), { role: 'assistant', content: paragraphs.join('\n\n'), delivery_status: 'sent' }, 'one message in the history');
});

t.test('an SMS to a number with no channel is acknowledged and ignored', async (t) => {
  const customer = '+15552220007';
  const kept = await inboundCount();
  const requests = twilio.requests.length;
  const res = await post('/channels/twilio/sms', inboundSmsForm({ from: customer, to: '+15559990000', body: 'Anyone?', accountSid: twilio.accountSid }));
  t.same([res.status, res.body], [200, EMPTY_TWIML]);
  await channels.idle();
  t.same(await conversationsOf(customer), []);
  t.equal(await inboundCount(), kept, 'nothing kept');
  t.equal(twilio.requests.length, requests, 'nothing sent');

  for (const field of ['From', 'MessageSid'] as const) {
    const form = smsForm(customer, 'A NUL in a field');
    form.set(field, `${form.get(field)}\u0000`);
    const odd = await post('/channels/twilio/sms', form);
    t.same([odd.status, odd.body], [200, EMPTY_TWIML], `a ${field} holding U+0000 is no message of Twilio's: acknowledged, never a 500`);
  }
  await channels.idle();
  t.equal(await inboundCount(), kept, 'nothing kept');
});

t.test("a number whose rent lapsed answers nothing until it is paid again", async (t) => {
  const customer = '+15552220010';
  await sql("UPDATE phone_numbers SET has_active_subscription = false, paid_until = now() - interval '1 day' WHERE id = $1", [number.id]);
  const before = await balance();
  const asked = llm.requests.length;
  await text(customer, 'Are you still there?');
  t.same(sentTo(customer), [], 'no reply');
  t.equal(llm.requests.length, asked, 'the assistant was not asked');
  t.equal(await spent(before), 0, 'not charged');
  const [conversation] = await conversationsOf(customer);
  t.same((await history(conversation!)).map((m: { content: string }) => m.content), ['Are you still there?'], 'the message is kept for the owner');
  await sql("UPDATE phone_numbers SET has_active_subscription = true, paid_until = now() + interval '1 month' WHERE id = $1", [number.id]);
  llm.scriptChat({ text: 'Yes, we are.' });
  await text(customer, 'Hello?');
  t.same(sentTo(customer), ['Yes, we are.'], 'paid again, it answers');
});

t.test('an MMS without text gets the text-only answer, not charged', async (t) => {
  const customer = '+15552220008';
  const before = await balance();
  const asked = llm.requests.length;
  await text(customer, '', { media: [{ contentType: 'image/jpeg' }] });
  const notice = 'I can only read text messages. Please write your message as text.';
  t.same(sentTo(customer), [notice]);
  t.equal(llm.requests.length, asked, 'the model was not asked');
  t.equal(await balance(), before, 'not charged');
  const [conversation] = await conversationsOf(customer);
  t.same(await history(conversation!), [
    { role: 'user', content: '[media]', delivery_status: 'received' },
    { role: 'assistant', content: notice, delivery_status: 'sent' },
  ]);
});

t.test('a customer Twilio has as opted out is put on the do-not-call list', async (t) => {
  await text('+15559990042', 'Hello');
  const [conversation] = await conversationsOf('+15559990042');
  twilio.optOut('+15559990042');
  const res = await api.request('POST', `/user/conversations/${conversation}/messages`, { token: owner.token, body: { message: 'Are you still there?' } });
  t.equal(res.status, 201);
  await channels.idle();
  t.equal((await history(conversation!)).at(-1).delivery_status, 'failed', 'Twilio refused it (21610)');
  const listed = await api.request('GET', '/user/do-not-call', { token: owner.token });
  t.ok(listed.body.data.some((entry: { phone_number: string }) => entry.phone_number === '+15559990042'), 'the number is on the list');
});
