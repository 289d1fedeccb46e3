import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { ChannelError } from '../runtime/channels/errors.js';
import { createGraphClient, parseWebhook, splitText, verifyHubSignature } from '../runtime/channels/whatsapp/wire.js';
import { buttonReplyWebhook, mediaMessageWebhook, signHub, startWhatsAppFake, statusWebhook, textMessageWebhook, type WhatsAppFake } from './fakes/whatsapp.js';

/**
 * The WhatsApp Cloud API wire, without the platform:
 * 1. `X-Hub-Signature-256` is accepted for the exact body and app secret, refused for a tampered
 *    body, another secret, a missing header, a wrong prefix or a malformed digest.
 * 2. Webhook bodies parse into one notification per business number: text (Meta's documented
 *    example), audio, image, location, reply button, list row, template quick reply, reaction,
 *    unsupported, and statuses sent/delivered/read/failed (Meta's examples, the failure's error
 *    named); unknown statuses and malformed messages are skipped one by one.
 * 3. Hostile bodies (non-objects, another object type, wrong types everywhere, huge arrays) bring
 *    no message or status and never throw; a change with neither (an errors report, an unknown
 *    status) still names its number; an id holding U+0000 is malformed.
 * 4. splitText: 4096 characters stay one part, 4097 make two; an emoji at the boundary is not cut;
 *    one long word is cut at the limit; paragraph, then sentence, then word boundaries are
 *    preferred; over random texts every part fits, is trimmed, non-empty, whole in code points,
 *    and the parts put together are the text.
 * 5. The Graph client sends a text, marks a message read and downloads media as Meta's wire has
 *    it (version path, bearer token, bare recipient digits).
 * 6. Errors: a wrong token (401) is not retryable, a 500 and a 429 are, another 4xx is not; an
 *    unreachable or silent API is retryable; the message names the status and Meta's words.
 * 7. Media larger than allowed is refused: as declared by Meta, and while streaming when the
 *    declared size lied.
 */

const SECRET = 'app-secret-0123456789';
const PHONE_ID = '106540352242922';
const TOKEN = 'EAAG-access-token';

/** Meta's envelope of a `messages` notification for the business number PHONE_ID around `value`. */
const envelope = (value: Record<string, unknown>) => ({
  object: 'whatsapp_business_account',
  entry: [{ id: '102290129340398', changes: [{ value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550783881', phone_number_id: PHONE_ID }, ...value }, field: 'messages' }] }],
});

async function fake(t: Test): Promise<WhatsAppFake> {
  const started = await startWhatsAppFake({ [PHONE_ID]: TOKEN });
  t.teardown(() => started.close());
  return started;
}

async function listen(t: Test, server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function refusal(promise: Promise<unknown>): Promise<ChannelError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ChannelError) return error;
    throw error;
  }
  throw new Error('expected a ChannelError');
}

t.test('the hub signature is accepted for the exact body and secret only', async (t) => {
  const raw = Buffer.from(JSON.stringify(textMessageWebhook({ phoneNumberId: PHONE_ID, from: '+16505551234', id: 'wamid.A', text: 'Hello' })));
  const header = signHub(SECRET, raw);
  t.match(header, /^sha256=[0-9a-f]{64}$/);
  t.ok(verifyHubSignature(SECRET, raw, header), 'the right signature');
  t.ok(verifyHubSignature(SECRET, new Uint8Array(raw), header.toUpperCase().replace('SHA256=', 'sha256=')), 'upper-case hex');
  const tampered = Buffer.from(raw.toString().replace('Hello', 'Hellp'));
  t.notOk(verifyHubSignature(SECRET, tampered, header), 'a tampered body');
  t.notOk(verifyHubSignature('another-secret', raw, header), 'another secret');
  t.notOk(verifyHubSignature(SECRET, raw, undefined), 'no header');
  t.notOk(verifyHubSignature(SECRET, raw, ''), 'an empty header');
  t.notOk(verifyHubSignature(SECRET, raw, header.replace('sha256=', 'sha1=')), 'another prefix');
  t.notOk(verifyHubSignature(SECRET, raw, header.slice('sha256='.length)), 'no prefix');
  t.notOk(verifyHubSignature(SECRET, raw, `${header}00`), 'a longer digest');
  t.notOk(verifyHubSignature(SECRET, raw, header.slice(0, -2)), 'a shorter digest');
  t.notOk(verifyHubSignature(SECRET, raw, `sha256=${'zz'.repeat(32)}`), 'not hex');
  t.notOk(verifyHubSignature('', raw, signHub('', raw)), 'no app secret verifies nothing');
});

t.test("Meta's documented text message and statuses parse", async (t) => {
  // https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples (text message)
  const text = {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: '102290129340398',
        changes: [
          {
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '15550783881', phone_number_id: '106540352242922' },
              contacts: [{ profile: { name: 'Sheena Nelson' }, wa_id: '16505551234' }],
              messages: [{ from: '16505551234', id: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=', timestamp: '1749416383', text: { body: 'Does it come in another color?' }, type: 'text' }],
            },
            field: 'messages',
          },
        ],
      },
    ],
  };
  t.same(parseWebhook(text), [
    {
      phoneNumberId: '106540352242922',
      messages: [{ id: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=', from: '+16505551234', timestamp: 1749416383, profileName: 'Sheena Nelson', kind: 'text', text: 'Does it come in another color?' }],
      statuses: [],
    },
  ]);

  // Status examples: delivered (with conversation and pricing) and failed (error 131047).
  const statuses = envelope({
    statuses: [
      {
        id: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3MTE5MjVBOTE3MDk5QUVFM0YA',
        status: 'delivered',
        timestamp: '1750263773',
        recipient_id: '16505551234',
        conversation: { id: '6ceb9d929c4bde6b4a5b8f3f3a3a7a1e', origin: { type: 'service' } },
        pricing: { billable: true, pricing_model: 'PMP', category: 'service' },
      },
      {
        id: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA',
        status: 'failed',
        timestamp: '1750263780',
        recipient_id: '16505551234',
        errors: [
          {
            code: 131047,
            title: 'Re-engagement message',
            message: 'Re-engagement message',
            error_data: { details: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.' },
            href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/',
          },
        ],
      },
    ],
  });
  t.same(parseWebhook(statuses), [
    {
      phoneNumberId: '106540352242922',
      messages: [],
      statuses: [
        { id: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3MTE5MjVBOTE3MDk5QUVFM0YA', status: 'delivered', recipient: '+16505551234', timestamp: 1750263773 },
        {
          id: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA',
          status: 'failed',
          recipient: '+16505551234',
          timestamp: 1750263780,
          error: 'Re-engagement message (131047): Message failed to send because more than 24 hours have passed since the customer last replied to this number.',
        },
      ],
    },
  ]);
});

t.test('every message kind parses', async (t) => {
  const sender = { phoneNumberId: PHONE_ID, from: '+4915112345678', timestamp: 1750000000, name: 'Jo' };
  const one = (body: unknown) => {
    const parsed = parseWebhook(body);
    t.equal(parsed.length, 1);
    t.equal(parsed[0]!.phoneNumberId, PHONE_ID);
    return parsed[0]!.messages[0];
  };
  t.same(one(textMessageWebhook({ ...sender, id: 'wamid.T', text: '  Hi there  ' })), { id: 'wamid.T', from: '+4915112345678', timestamp: 1750000000, profileName: 'Jo', kind: 'text', text: '  Hi there  ' });
  t.same(one(mediaMessageWebhook({ ...sender, id: 'wamid.Au', kind: 'audio', mediaId: 'media-1' })), {
    id: 'wamid.Au',
    from: '+4915112345678',
    timestamp: 1750000000,
    profileName: 'Jo',
    kind: 'audio',
    media: { id: 'media-1', mimeType: 'audio/ogg; codecs=opus' },
  });
  const image = one(mediaMessageWebhook({ ...sender, id: 'wamid.Im', kind: 'image', mediaId: 'media-2', caption: 'my receipt' }));
  t.same([image?.kind, image?.media, image?.caption, image?.text], ['image', { id: 'media-2', mimeType: 'image/jpeg' }, 'my receipt', undefined], 'a caption is not text');
  const location = one(mediaMessageWebhook({ ...sender, id: 'wamid.Lo', kind: 'location' }));
  t.same([location?.kind, location?.text, location?.media], ['location', undefined, undefined]);
  t.same(location?.location, { latitude: 38.9806263495, longitude: -131.9519297481, name: 'Philz Coffee', address: '101 Forest Ave, Palo Alto, CA 94301' });
  const button = one(buttonReplyWebhook({ ...sender, id: 'wamid.Bu', title: 'Yes, book it', replyTo: 'wamid.OURS' }));
  t.same([button?.kind, button?.text, button?.replyTo], ['interactive', 'Yes, book it', 'wamid.OURS']);
  const list = one(buttonReplyWebhook({ ...sender, id: 'wamid.Li', title: 'Tuesday 10:00', style: 'list' }));
  t.same([list?.kind, list?.text], ['interactive', 'Tuesday 10:00']);
  const template = one(buttonReplyWebhook({ ...sender, id: 'wamid.Te', title: 'Stop promotions', style: 'template' }));
  t.same([template?.kind, template?.text], ['button', 'Stop promotions']);

  const base = { from: '16505551234', timestamp: '1750000001' };
  const [reaction, unsupported, sticker, document, contacts] = parseWebhook(
    envelope({
      messages: [
        { ...base, id: 'wamid.Re', type: 'reaction', reaction: { message_id: 'wamid.OURS', emoji: '\u{1F600}' } },
        { ...base, id: 'wamid.Un', type: 'unsupported', errors: [{ code: 131051, title: 'Message type unknown' }] },
        { ...base, id: 'wamid.St', type: 'sticker', sticker: { mime_type: 'image/webp', sha256: 'x', id: 'media-3', animated: false } },
        { ...base, id: 'wamid.Do', type: 'document', document: { filename: 'a.pdf', mime_type: 'application/pdf', sha256: 'x', id: 'media-4' } },
        { ...base, id: 'wamid.Co', type: 'contacts', contacts: [{ name: { formatted_name: 'Ann' }, phones: [{ phone: '+1 555' }] }] },
      ],
    }),
  )[0]!.messages;
  t.same(reaction, { id: 'wamid.Re', from: '+16505551234', timestamp: 1750000001, kind: 'reaction', reaction: { messageId: 'wamid.OURS', emoji: '\u{1F600}' } }, 'no contacts: no profile name');
  t.same(unsupported, { id: 'wamid.Un', from: '+16505551234', timestamp: 1750000001, kind: 'unsupported' });
  t.same([sticker?.kind, sticker?.media], ['sticker', { id: 'media-3', mimeType: 'image/webp' }]);
  t.same([document?.kind, document?.media], ['document', { id: 'media-4', mimeType: 'application/pdf' }]);
  t.same([contacts?.kind, contacts?.text], ['contacts', undefined]);
});

t.test('statuses of every kind parse; unknown statuses and malformed items are skipped one by one', async (t) => {
  for (const status of ['sent', 'delivered', 'read'] as const) {
    t.same(parseWebhook(statusWebhook({ phoneNumberId: PHONE_ID, id: 'wamid.S', status, recipient: '+16505551234', timestamp: 1750000002 })), [
      { phoneNumberId: PHONE_ID, messages: [], statuses: [{ id: 'wamid.S', status, recipient: '+16505551234', timestamp: 1750000002 }] },
    ]);
  }
  const failed = parseWebhook(statusWebhook({ phoneNumberId: PHONE_ID, id: 'wamid.F', status: 'failed', recipient: '16505551234', errors: [{ code: 131026, title: 'Message undeliverable' }] }));
  t.equal(failed[0]!.statuses[0]!.error, 'Message undeliverable (131026)');
  t.same(parseWebhook(statusWebhook({ phoneNumberId: PHONE_ID, id: 'wamid.D', status: 'deleted', recipient: '16505551234' })), [{ phoneNumberId: PHONE_ID, messages: [], statuses: [] }], 'an unknown status: its number named, nothing recorded');
  const errorsOnly = { object: 'whatsapp_business_account', entry: [{ id: '1', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550783881', phone_number_id: PHONE_ID }, errors: [{ code: 131051, title: 'Message type unknown' }] } }] }] };
  t.same(parseWebhook(errorsOnly), [{ phoneNumberId: PHONE_ID, messages: [], statuses: [] }], 'an errors report names its number (so its signature is checked) and brings nothing');
  const nul = textMessageWebhook({ phoneNumberId: PHONE_ID, from: '16505551234', id: 'wamid.\u0000x', text: 'a NUL in the id' });
  t.same(parseWebhook(nul)[0]!.messages, [], 'an id holding U+0000 (no id of Meta\'s does) is malformed');

  const mixed = textMessageWebhook({ phoneNumberId: PHONE_ID, from: '16505551234', id: 'wamid.Good', text: 'kept', timestamp: 1750000003 });
  const value = mixed.entry[0]!.changes[0]!.value as { messages: unknown[]; statuses?: unknown[] };
  value.messages.unshift(
    null,
    'text',
    { from: '16505551234', timestamp: '1', type: 'text', text: { body: 'no id' } },
    { id: 'wamid.X', from: '+16505551234', timestamp: '1', type: 'text', text: { body: 'a plus in from' } },
    { id: 'wamid.X', from: 'someone', timestamp: '1', type: 'text', text: { body: 'not a number' } },
    { id: 'wamid.X', from: '16505551234', timestamp: 'yesterday', type: 'text', text: { body: 'bad time' } },
    { id: 'wamid.X', from: '16505551234', timestamp: '1', type: 'text', text: { body: 42 } },
    { id: 'wamid.X', from: '16505551234', timestamp: '1', type: 'text' },
    { id: 'wamid.X', from: '16505551234', timestamp: '1' },
  );
  value.statuses = [{ id: 'wamid.S', status: 'read', timestamp: '1' }, { status: 'read', recipient_id: '1', timestamp: '1' }, 7];
  t.same(parseWebhook(mixed)[0]!.messages.map((message) => message.id), ['wamid.Good']);
  t.same(parseWebhook(mixed)[0]!.statuses, []);
});

t.test('changes for one number merge, other numbers and fields stay apart', async (t) => {
  const a = textMessageWebhook({ phoneNumberId: 'A', from: '16505551234', id: 'wamid.1', text: 'one', timestamp: 1 });
  const b = statusWebhook({ phoneNumberId: 'B', id: 'wamid.2', status: 'sent', recipient: '16505551234', timestamp: 2 });
  const a2 = textMessageWebhook({ phoneNumberId: 'A', from: '16505551234', id: 'wamid.3', text: 'two', timestamp: 3 });
  const body = { object: 'whatsapp_business_account', entry: [...a.entry, ...b.entry, ...a2.entry, { id: 'x', changes: [{ field: 'account_update', value: { metadata: { phone_number_id: 'C' }, messages: [] } }] }] };
  const parsed = parseWebhook(body);
  t.same(parsed.map((item) => [item.phoneNumberId, item.messages.map((message) => message.text), item.statuses.map((status) => status.id)]), [
    ['A', ['one', 'two'], []],
    ['B', [], ['wamid.2']],
  ]);
});

t.test('hostile bodies bring nothing, without throwing', async (t) => {
  const valid = textMessageWebhook({ phoneNumberId: PHONE_ID, from: '16505551234', id: 'wamid.1', text: 'hi' });
  const hostile: unknown[] = [
    undefined,
    null,
    0,
    'whatsapp_business_account',
    [],
    [valid],
    {},
    { ...valid, object: 'page' },
    { object: 'whatsapp_business_account' },
    { object: 'whatsapp_business_account', entry: 'x' },
    { object: 'whatsapp_business_account', entry: [null, 1, 'x', [], { changes: 5 }, { changes: [null, { field: 'messages' }, { field: 'messages', value: [] }] }] },
    { object: 'whatsapp_business_account', entry: [{ changes: [{ field: 'messages', value: { metadata: { phone_number_id: 12 }, messages: valid.entry[0]!.changes[0]!.value.messages } }] }] },
    { object: 'whatsapp_business_account', entry: [{ changes: [{ field: 'messages', value: { metadata: null, messages: valid.entry[0]!.changes[0]!.value.messages } }] }] },
    { object: 'whatsapp_business_account', entry: [{ changes: [{ field: 'messages', value: { metadata: { phone_number_id: PHONE_ID }, messages: {}, statuses: 'all', contacts: 3 } }] }] },
    JSON.parse('{"object":"whatsapp_business_account","__proto__":{"entry":[1]},"entry":[{"__proto__":{"changes":[]}}]}'),
    { object: 'whatsapp_business_account', entry: Array.from({ length: 200_000 }, (_, i) => (i % 2 ? { changes: Array.from({ length: 3 }, () => ({ field: 'messages' })) } : i)) },
    {
      object: 'whatsapp_business_account',
      entry: [{ changes: [{ field: 'messages', value: { metadata: { phone_number_id: PHONE_ID }, contacts: Array(100_000).fill({ wa_id: 1 }), messages: Array(100_000).fill({ id: 1, type: {} }), statuses: Array(100_000).fill({ status: 'read' }) } }] }],
    },
  ];
  // A body naming a business number names it (its signature is checked), with nothing in it.
  const brought = (body: unknown) => parseWebhook(body).flatMap((n) => [...n.messages, ...n.statuses]);
  for (const [index, body] of hostile.entries()) t.same(brought(body), [], `hostile body ${index}`);
  t.same(parseWebhook(hostile[13]).map((n) => n.phoneNumberId), [PHONE_ID], 'a hostile body that names a number');
  t.equal(parseWebhook(valid).length, 1, 'the valid body itself parses');
});

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

t.test('splitText keeps within 4096 characters at the best boundary', async (t) => {
  t.same(splitText('a'.repeat(4096)), ['a'.repeat(4096)], 'exactly the limit is one part');
  t.same(splitText('a'.repeat(4097)), ['a'.repeat(4096), 'a'], 'one over the limit is two parts');
  const emoji = splitText(`${'a'.repeat(4095)}\u{1F600}b`);
  t.same(emoji, ['a'.repeat(4095), '\u{1F600}b'], 'an emoji across the boundary moves whole to the next part');
  t.same(splitText('x'.repeat(9000)).map((part) => part.length), [4096, 4096, 808], 'one long word is cut at the limit');
  t.same(splitText('   \n\n  '), [], 'white space alone is nothing to send');
  t.same(splitText('  Hello.  '), ['Hello.'], 'a short text is one trimmed part');

  const first = `${'First paragraph. '.repeat(100).trim()}`;
  const second = `${'Second paragraph goes on. '.repeat(100).trim()}`;
  t.same(splitText(`${first}\n\n${second}`, 4096), [first, second], 'a paragraph break that fits is preferred');
  const sentences = Array.from({ length: 6 }, (_, i) => `Sentence ${i} ${'word '.repeat(150).trim()}.`).join(' ');
  const bySentence = splitText(sentences, 2000);
  t.ok(bySentence.length > 1 && bySentence.every((part) => part.endsWith('.') && part.length <= 2000), 'then a sentence end');
  t.equal(bySentence.join(' '), sentences);
  const words = Array.from({ length: 900 }, (_, i) => `w${i}`).join(' ');
  const byWord = splitText(words, 1000);
  t.ok(byWord.every((part) => part.length <= 1000 && /^w\d+( w\d+)*$/.test(part)), 'then a space, never inside a word');
  t.equal(byWord.join(' '), words);
  t.throws(() => splitText('abc', 1), RangeError);
});

t.test('splitText over random texts: every part fits, is trimmed, whole, and nothing is lost', async (t) => {
  let seed = 42;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const pieces = ['word', 'x', 'longerwordwithoutbreaks', '. ', '! ', ' ', ' ', ' ', '\n', '\n\n', '\u{1F600}', '\u{1F469}\u200D\u{1F4BB}', 'é', '日本語', '?\n'];
  for (let round = 0; round < 200; round++) {
    const limit = 2 + Math.floor(random() * 60);
    let text = '';
    const length = Math.floor(random() * 400);
    while (text.length < length) text += pieces[Math.floor(random() * pieces.length)];
    const parts = splitText(text, limit);
    const bad = parts.find((part) => part.length > limit || part !== part.trim() || part === '' || loneSurrogate.test(part));
    if (bad !== undefined) t.fail(`round ${round}: bad part ${JSON.stringify(bad)} at limit ${limit}`);
    if (parts.join('').replace(/\s/g, '') !== text.replace(/\s/g, '')) t.fail(`round ${round}: the parts are not the text`);
  }
  t.pass('200 random texts split soundly');
});

t.test('the Graph client sends, marks read and downloads media on the wire', async (t) => {
  const graph = await fake(t);
  const client = createGraphClient({ apiUrl: graph.apiUrl, version: 'v21.0' });
  const sent = await client.sendText(PHONE_ID, TOKEN, '+16505551234', 'Hello there');
  await graph.waitForSent(1);
  t.same(sent, { id: 'wamid.1' });
  t.same(graph.sent, [{ phoneNumberId: PHONE_ID, to: '16505551234', text: 'Hello there', id: 'wamid.1' }]);
  t.same(graph.requests[0], { method: 'POST', path: `/v21.0/${PHONE_ID}/messages`, authorization: `Bearer ${TOKEN}`, status: 200 });

  await client.markRead(PHONE_ID, TOKEN, 'wamid.CUSTOMER');
  await graph.waitForReads(1);
  t.same(graph.reads, [{ phoneNumberId: PHONE_ID, messageId: 'wamid.CUSTOMER' }]);

  const bytes = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 256));
  graph.media('media-9', bytes, 'audio/ogg');
  const media = await client.downloadMedia('media-9', TOKEN, 5000);
  t.same([media.mimeType, media.bytes.equals(bytes)], ['audio/ogg', true]);
  t.same(graph.requests.slice(-2).map((request) => [request.method, request.path, request.authorization]), [
    ['GET', '/v21.0/media-9', `Bearer ${TOKEN}`],
    ['GET', '/media-download/media-9', `Bearer ${TOKEN}`],
  ]);
});

t.test('Graph errors map to retryable or not, naming the status and Meta’s words', async (t) => {
  const graph = await fake(t);
  const client = createGraphClient({ apiUrl: graph.apiUrl, version: 'v21.0' });

  const unauthorised = await refusal(client.sendText(PHONE_ID, 'wrong-token', '+16505551234', 'hi'));
  t.same([unauthorised.status, unauthorised.retryable, unauthorised.vendorCode], [401, false, 190]);
  t.match(unauthorised.message, /HTTP 401.*Invalid OAuth access token/);
  t.equal((await refusal(client.markRead(PHONE_ID, 'wrong-token', 'wamid.X'))).status, 401, 'marking read checks the token too');
  t.equal((await refusal(client.downloadMedia('media-1', 'wrong-token', 10))).status, 401, 'so does media');

  graph.failSends(2, 500);
  const first = await refusal(client.sendText(PHONE_ID, TOKEN, '+16505551234', 'hi'));
  t.same([first.status, first.retryable], [500, true]);
  t.match(first.message, /HTTP 500.*Something went wrong/);
  t.equal((await refusal(client.sendText(PHONE_ID, TOKEN, '+16505551234', 'hi'))).status, 500, 'the second failure');
  t.same(await client.sendText(PHONE_ID, TOKEN, '+16505551234', 'hi'), { id: 'wamid.1' }, 'then sends pass again');

  graph.failSends(1, 429);
  const throttled = await refusal(client.sendText(PHONE_ID, TOKEN, '+16505551234', 'hi'));
  t.same([throttled.status, throttled.retryable, throttled.vendorCode], [429, true, 130429]);
  graph.failSends(1, 400);
  const invalid = await refusal(client.sendText(PHONE_ID, TOKEN, '+16505551234', 'hi'));
  t.same([invalid.status, invalid.retryable], [400, false]);
  t.equal((await refusal(client.downloadMedia('missing', TOKEN, 10))).retryable, false, 'unknown media is a 4xx');
  t.equal(graph.sent.length, 1, 'no refused send was recorded as sent');

  const closed = createServer();
  const closedUrl = await listen(t, closed);
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const unreachable = await refusal(createGraphClient({ apiUrl: closedUrl, version: 'v21.0' }).sendText(PHONE_ID, TOKEN, '+16505551234', 'hi'));
  t.same([unreachable.status, unreachable.retryable], [undefined, true]);
  t.match(unreachable.message, /could not be reached/);

  const silentUrl = await listen(t, createServer(() => undefined));
  const silent = await refusal(createGraphClient({ apiUrl: silentUrl, version: 'v21.0', timeoutMs: 200 }).markRead(PHONE_ID, TOKEN, 'wamid.X'));
  t.same([silent.status, silent.retryable], [undefined, true], 'a request past its time limit');
});

t.test('media larger than allowed is refused, declared or streamed', async (t) => {
  const graph = await fake(t);
  const client = createGraphClient({ apiUrl: graph.apiUrl, version: 'v21.0' });
  graph.media('big', Buffer.alloc(2048, 1), 'image/jpeg');
  const declared = await refusal(client.downloadMedia('big', TOKEN, 2047));
  t.same([declared.retryable, declared.status], [false, undefined]);
  t.match(declared.message, /larger than the 2047 bytes/);
  t.notOk(graph.requests.some((request) => request.path.startsWith('/media-download/')), 'the bytes were never fetched');
  t.equal((await client.downloadMedia('big', TOKEN, 2048)).bytes.length, 2048, 'exactly the limit is allowed');

  // A server whose metadata understates the size and streams the bytes without a length.
  let origin = '';
  const liar = createServer((req, res) => {
    if (req.url === '/v21.0/lying') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ url: `${origin}/bytes`, mime_type: 'video/mp4', sha256: 'x', file_size: '10', id: 'lying', messaging_product: 'whatsapp' }));
    }
    res.writeHead(200, { 'content-type': 'video/mp4' });
    for (let chunk = 0; chunk < 64; chunk++) res.write(Buffer.alloc(1024, chunk));
    res.end();
  });
  origin = await listen(t, liar);
  const streamed = await refusal(createGraphClient({ apiUrl: origin, version: 'v21.0' }).downloadMedia('lying', TOKEN, 4096));
  t.same([streamed.retryable, /larger than the 4096 bytes/.test(streamed.message)], [false, true]);
});
