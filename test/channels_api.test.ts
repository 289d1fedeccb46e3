/**
 * Messaging channels' settings over the API (their conversations are whatsapp_channel and sms_channel's):
 * 1. a WhatsApp channel: 201 with the channel, its webhook URL and which secrets are set; the
 *    secrets are never returned (create, read, list, update) and are sealed in the database (no
 *    secret's bytes in its row); GET one and the list read it back.
 * 2. an SMS channel on an SMS-capable number of the owner's: 201 with the number; a number that
 *    cannot take SMS, a caller id, a number on another carrier than Twilio, another user's number,
 *    secrets on SMS: 422 field errors.
 * 3. validation: type, assistant (another user's), WhatsApp's phone number id (digits; a safe
 *    JSON number taken), missing secrets, a short verify token; a verify token another channel
 *    uses is taken (refusing it would tell one owner of another's).
 * 4. one channel per number: a second channel on a WhatsApp number (anyone's) or SMS number is a 422;
 *    a WhatsApp number id is taken only with an access token Meta confirms for it (the Graph API's
 *    number node), so nobody takes, or learns of, a number that is not theirs.
 * 5. update keeps what it leaves out (secrets included), moves the assistant, refuses a type
 *    change; another user's channel is 404 on every operation; delete removes it.
 * 6. without the platform's Twilio account, an SMS channel cannot be created (422 naming the settings).
 * 7. the sealed secrets open only with the key they were sealed under: the key file in DATA_DIR is
 *    made once (mode 0600) and read again; a changed key is reported, not taken for another secret.
 * 8. served by a process whose key differs, a channel's notifications are refused (401, nothing
 *    kept, never a 500), an update that would keep its secrets is a 422 asking for all three, and
 *    one sending all three seals them anew, after which the channel takes notifications again.
 * 9. an SMS channel's number id must be a safe integer: 1e20, 1e300, 2^53, 1.5 and 0 are 422s.
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { signHub, startWhatsAppFake } from './fakes/whatsapp.js';
import { channelSecretsKey, createSealer, KEY_FILE } from '../runtime/channels/sealing.js';

const twilio = { accountSid: 'AC' + '0'.repeat(32), authToken: 'twilio-token', apiUrl: 'http://127.0.0.1:9' };
// Meta confirms a number only to a token of it: Alice's token reaches her numbers, Bob's his.
const graph = await startWhatsAppFake({ '106540352242922': 'EAAG-access-token-secret', '1234567890': 'EAAG-access-token-secret', '999': 'EAAG-access-token-secret', '555': 'EAAG-access-token-secret' });
t.teardown(() => graph.close());
graph.token('555', 'EAAG-rotated');
graph.token('1234567890', 'EAAG-bobs-token');
const api = await startTestPlatform(t, { twilio, twilioAuthToken: twilio.authToken, channels: { whatsappApiUrl: graph.apiUrl, whatsappApiVersion: 'v21.0', secretsKey: undefined } });
const alice = await api.user('Alice');
const bob = await api.user('Bob');
await api.credit(alice.id, 100);
await api.credit(bob.id, 100);
const assistant = await api.assistant(alice.token);
const other = await api.assistant(alice.token, { name: 'Other' });
const bobsAssistant = await api.assistant(bob.token);
const sql = (text: string, values: unknown[] = []) => withClient(api.databaseUrl, (db) => db.query(text, values));

const create = (body: Record<string, unknown>, token = alice.token) => api.request('POST', '/user/channels', { token, body });
const whatsapp = (fields: Record<string, unknown> = {}) => ({
  type: 'whatsapp',
  assistant_id: assistant.id,
  phone_number_id: '106540352242922',
  access_token: 'EAAG-access-token-secret',
  app_secret: 'app-secret-value',
  verify_token: 'verify-token-1',
  ...fields,
});

t.test('a WhatsApp channel: created, read back, secrets sealed and never shown', async (t) => {
  const res = await create(whatsapp());
  t.equal(res.status, 201);
  t.equal(res.body.message, 'Channel created successfully');
  const channel = res.body.data;
  t.match(channel, {
    id: Number,
    type: 'whatsapp',
    assistant_id: assistant.id,
    phone_number_id: '106540352242922',
    phone_number: null,
    webhook_url: `${api.origin}/api/channels/whatsapp/webhook`,
    secrets: ['access_token', 'app_secret', 'verify_token'],
  });
  const text = JSON.stringify(res.body);
  for (const secret of ['EAAG-access-token-secret', 'app-secret-value', 'verify-token-1']) t.notOk(text.includes(secret), `the answer does not carry ${secret}`);
  t.same((await api.request('GET', `/user/channels/${channel.id}`, { token: alice.token })).body.data, channel);
  t.same((await api.request('GET', '/user/channels', { token: alice.token })).body.data, [channel]);
  const row = (await sql('SELECT sealed_secrets, verify_token_digest FROM channels WHERE id = $1', [channel.id])).rows[0];
  for (const secret of ['EAAG-access-token-secret', 'app-secret-value', 'verify-token-1']) t.equal(row.sealed_secrets.indexOf(Buffer.from(secret)), -1, `${secret} is not stored in clear`);
  t.notSame(row.verify_token_digest, createHash('sha256').update('verify-token-1').digest(), 'the verify token is kept as a keyed digest, not a bare hash');
  await api.request('DELETE', `/user/channels/${channel.id}`, { token: alice.token });
});

t.test('an SMS channel on an SMS-capable number of the owner', async (t) => {
  const number = await api.phoneNumber(alice.token);
  await sql('UPDATE phone_numbers SET sms_capable = true WHERE id = $1', [number.id]);
  const res = await create({ type: 'sms', assistant_id: assistant.id, phone_number_id: number.id });
  t.equal(res.status, 201);
  t.match(res.body.data, { type: 'sms', phone_number_id: number.id, phone_number: number.number, webhook_url: `${api.origin}/api/channels/twilio/sms`, secrets: [] });
  const again = await create({ type: 'sms', assistant_id: other.id, phone_number_id: number.id });
  t.equal(again.status, 422);
  t.same(again.body.errors, { phone_number_id: ['This number already has a channel.'] });
  await api.request('DELETE', `/user/channels/${res.body.data.id}`, { token: alice.token });

  await sql('UPDATE phone_numbers SET sms_capable = false WHERE id = $1', [number.id]);
  t.same((await create({ type: 'sms', assistant_id: assistant.id, phone_number_id: number.id })).body.errors, { phone_number_id: ['The selected number cannot receive SMS.'] });
  await sql("UPDATE phone_numbers SET sms_capable = true, carrier = 'telnyx' WHERE id = $1", [number.id]);
  t.same((await create({ type: 'sms', assistant_id: assistant.id, phone_number_id: number.id })).body.errors, { phone_number_id: ['SMS channels send through Twilio Messaging: this number is on telnyx.'] });
  await sql("UPDATE phone_numbers SET sms_capable = false, carrier = 'twilio' WHERE id = $1", [number.id]);
  const bobs = await api.phoneNumber(bob.token);
  t.same((await create({ type: 'sms', assistant_id: assistant.id, phone_number_id: bobs.id })).body.errors, { phone_number_id: ['The selected phone number id is invalid.'] });
  for (const id of ['abc', 1e20, 1e300, 2 ** 53, 1.5, 0]) {
    const res = await create({ type: 'sms', assistant_id: assistant.id, phone_number_id: id });
    t.equal(res.status, 422, `phone_number_id ${id}`);
    t.same(res.body.errors, { phone_number_id: ['The phone number id must be the integer id of one of your numbers.'] }, `phone_number_id ${id}`);
  }
  t.same((await create({ type: 'sms', assistant_id: assistant.id, phone_number_id: number.id, access_token: 'x' })).body.errors, { access_token: ['The access_token field is only for whatsapp channels.'] });
});

t.test('validation of a WhatsApp channel', async (t) => {
  const errors = async (body: Record<string, unknown>) => {
    const res = await create(body);
    t.equal(res.status, 422, JSON.stringify(body));
    return res.body.errors;
  };
  t.ok((await errors({ ...whatsapp(), type: 'telegram' })).type);
  t.same(await errors(whatsapp({ assistant_id: bobsAssistant.id })), { assistant_id: ['The selected assistant id is invalid.'] });
  t.ok((await errors(whatsapp({ assistant_id: undefined }))).assistant_id);
  t.same(await errors(whatsapp({ phone_number_id: '+1 555' })), { phone_number_id: ["The phone number id must be the WhatsApp Business phone number id (digits, from Meta's WhatsApp Manager)."] });
  t.same(await errors(whatsapp({ access_token: undefined })), { access_token: ['The access_token field is required for whatsapp channels.'] });
  t.ok((await errors(whatsapp({ verify_token: 'short' }))).verify_token);
  const numeric = await create(whatsapp({ phone_number_id: 1234567890, verify_token: 'verify-token-numeric' }));
  t.equal(numeric.status, 201);
  t.equal(numeric.body.data.phone_number_id, '1234567890');
  const shared = await create(whatsapp({ phone_number_id: '999', verify_token: 'verify-token-numeric' }));
  t.equal(shared.status, 201, "a verify token may be another channel's too: no owner learns of another's");
  await api.request('DELETE', `/user/channels/${shared.body.data.id}`, { token: alice.token });
  t.same(await errors(whatsapp({ phone_number_id: '1234567890', verify_token: 'verify-token-other' })), { phone_number_id: ['This number already has a channel.'] });
  t.equal((await create(whatsapp({ phone_number_id: '1234567890', verify_token: 'verify-token-bob', assistant_id: bobsAssistant.id, access_token: 'EAAG-bobs-token' }), bob.token)).status, 422, "another user's number too");
  const unconfirmed = await errors(whatsapp({ phone_number_id: '31337', verify_token: 'verify-token-not-mine' }));
  t.match(unconfirmed, { access_token: [/^Meta did not confirm the phone number id with this access token: The WhatsApp Cloud API refused the request \(HTTP 40\d/] }, 'a number id the token does not reach is refused');
  t.match(await errors(whatsapp({ phone_number_id: '555', verify_token: 'verify-token-x', access_token: 'EAAG-someone-else' })), { access_token: [/^Meta did not confirm/] }, "a token that is not the number's");
  await api.request('DELETE', `/user/channels/${numeric.body.data.id}`, { token: alice.token });
});

t.test('update keeps what it leaves out; another user sees nothing; delete', async (t) => {
  const channel = (await create(whatsapp({ phone_number_id: '555', verify_token: 'verify-token-555' }))).body.data;
  const moved = await api.request('PUT', `/user/channels/${channel.id}`, { token: alice.token, body: { assistant_id: other.id } });
  t.equal(moved.status, 200);
  t.equal(moved.body.message, 'Channel updated successfully');
  t.match(moved.body.data, { assistant_id: other.id, phone_number_id: '555', secrets: ['access_token', 'app_secret', 'verify_token'] });
  const sealer = createSealer(await channelSecretsKey(undefined, api.config.dataDir));
  const sealed = async () => sealer.open<Record<string, string>>((await sql('SELECT sealed_secrets FROM channels WHERE id = $1', [channel.id])).rows[0].sealed_secrets);
  t.same(await sealed(), { access_token: 'EAAG-access-token-secret', app_secret: 'app-secret-value', verify_token: 'verify-token-555' });
  await api.request('PUT', `/user/channels/${channel.id}`, { token: alice.token, body: { access_token: 'EAAG-rotated' } });
  t.same(await sealed(), { access_token: 'EAAG-rotated', app_secret: 'app-secret-value', verify_token: 'verify-token-555' });
  t.same((await api.request('PUT', `/user/channels/${channel.id}`, { token: alice.token, body: { type: 'sms' } })).body.errors, { type: ['The type of a channel cannot change; create another channel.'] });

  for (const [method, body] of [['GET'], ['PUT', { assistant_id: bobsAssistant.id }], ['DELETE']] as const) {
    const res = await api.request(method, `/user/channels/${channel.id}`, { token: bob.token, body });
    t.equal(res.status, 404, `${method} by another user`);
    t.same(res.body, { message: 'Channel not found.' });
  }
  t.same((await api.request('GET', '/user/channels', { token: bob.token })).body.data, []);
  t.equal((await api.request('GET', '/user/channels/abc', { token: alice.token })).status, 404);
  const deleted = await api.request('DELETE', `/user/channels/${channel.id}`, { token: alice.token });
  t.same([deleted.status, deleted.body], [200, { message: 'Channel deleted successfully' }]);
  t.equal((await api.request('GET', `/user/channels/${channel.id}`, { token: alice.token })).status, 404);
});

t.test('without the platform\'s Twilio account, no SMS channel', async (t) => {
  const plain = await startTestPlatform(t);
  const carol = await plain.user('Carol');
  await plain.credit(carol.id, 100);
  const bot = await plain.assistant(carol.token);
  const number = await plain.phoneNumber(carol.token);
  const res = await plain.request('POST', '/user/channels', { token: carol.token, body: { type: 'sms', assistant_id: bot.id, phone_number_id: number.id } });
  t.equal(res.status, 422);
  t.same(res.body.errors, { type: ["SMS channels send through the platform's Twilio account: set TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN."] });
});

t.test('secrets sealed under a key the server no longer has', async (t) => {
  const channel = (await create(whatsapp({ phone_number_id: '999', verify_token: 'verify-token-999' }))).body.data;
  // The same database served by a process whose key differs (CHANNEL_SECRETS_KEY changed, or a machine with its own key file).
  const moved = await startTestPlatform(t, { databaseUrl: api.databaseUrl, twilio, twilioAuthToken: twilio.authToken, channels: { whatsappApiUrl: graph.apiUrl, whatsappApiVersion: 'v21.0', secretsKey: Buffer.alloc(32, 7) } });
  const raw = JSON.stringify({ object: 'whatsapp_business_account', entry: [{ id: '1', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '1', phone_number_id: '999' }, messages: [{ from: '15550001234', id: 'wamid.key-1', timestamp: '1764000000', type: 'text', text: { body: 'hi' } }] } }] }] });
  const signed = { 'content-type': 'application/json', 'x-hub-signature-256': signHub('app-secret-value', raw) };
  const refused = await moved.request('POST', '/channels/whatsapp/webhook', { raw, headers: signed });
  t.same([refused.status, refused.body], [401, { message: 'The request signature is not valid.' }], 'a notification cannot be checked: refused, not a server error');
  t.equal((await sql("SELECT count(*)::int AS n FROM channel_inbound WHERE external_id = 'wamid.key-1'")).rows[0].n, 0, 'nothing was kept');
  const keep = await moved.request('PUT', `/user/channels/${channel.id}`, { token: alice.token, body: { assistant_id: other.id } });
  t.equal(keep.status, 422, 'an update that would keep them');
  t.match(keep.body.errors, { access_token: [/cannot be opened with this server's key.*send access_token, app_secret and verify_token again/] });
  const again = await moved.request('PUT', `/user/channels/${channel.id}`, { token: alice.token, body: { access_token: 'EAAG-access-token-secret', app_secret: 'app-secret-value', verify_token: 'verify-token-999' } });
  t.equal(again.status, 200, 'all three sent again replace them');
  const accepted = await moved.request('POST', '/channels/whatsapp/webhook', { raw, headers: signed });
  t.equal(accepted.status, 200, 'and the channel takes notifications again');
  await moved.platform.runtime.services.channels.idle();
  await api.request('DELETE', `/user/channels/${channel.id}`, { token: alice.token });
});

t.test('the key file: made once, private, and a changed key is reported', async (t) => {
  const path = join(api.config.dataDir, KEY_FILE);
  t.equal((await stat(path)).mode & 0o777, 0o600);
  const key = await channelSecretsKey(undefined, api.config.dataDir);
  t.equal((await readFile(path, 'utf8')).trim(), key.toString('hex'));
  const [a, b] = await Promise.all([channelSecretsKey(undefined, `${api.config.dataDir}/fresh`), channelSecretsKey(undefined, `${api.config.dataDir}/fresh`)]);
  t.ok(a.equals(b), 'two processes starting together agree on one key');
  const sealed = createSealer(a).seal({ access_token: 'x' });
  t.throws(() => createSealer(key).open(sealed), /sealed under another key/);
  const altered = Buffer.from(sealed);
  altered.writeUInt8(altered.readUInt8(altered.length - 1) ^ 1, altered.length - 1);
  t.throws(() => createSealer(a).open(altered));
  t.same(createSealer(a).open(sealed), { access_token: 'x' });
});
