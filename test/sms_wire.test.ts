import { createHmac } from 'node:crypto';
import { createServer } from 'node:net';
import t from 'tap';
import { twilioSignatureMatches } from '../runtime/calls/carriers/twilioSignature.js';
import { ChannelError } from '../runtime/channels/errors.js';
import { createTwilioMessaging, inboundKeyword, keywordOf, parseInboundSms, parseStatusCallback, splitSms, TWILIO_UNSUBSCRIBED, TwilioMessagingError } from '../runtime/channels/sms/wire.js';
import { inboundSmsForm, signTwilio, startTwilioMessagingFake, statusCallbackForm } from './fakes/twilioMessaging.js';

/**
 * Twilio Messaging (SMS) on the wire, without a platform:
 * 1. an incoming message's form (as Twilio posts it) read: text, MMS with media, OptOutType, missing fields, fields holding U+0000;
 * 2. every MessageStatus mapped (sent, delivered, read, failed with Twilio's error code; the rest not recorded);
 * 3. the opt-out, opt-in and help keywords: each word, any case, spaces and punctuation around it, never inside a sentence; OptOutType first;
 * 4. replies cut to 1,600: exactly 1,600 and 1,601, paragraph, sentence and word boundaries, an emoji at the cut, one long word;
 * 5. the Messages API client against the fake: basic auth and form fields, 401, 21610 not retryable, 429 and 500 retryable, an unreachable or silent API retryable;
 * 6. the signature over a builder's form, as Twilio computes it.
 */

const ACCOUNT = 'AC0123456789abcdef0123456789abcdef';

t.test('an incoming message is read from the form Twilio posts', async (t) => {
  const text = parseInboundSms(inboundSmsForm({ from: '+14155550100', to: '+14155550199', body: 'Do you open on Sundays?', accountSid: ACCOUNT, sid: 'SM11111111111111111111111111111111' }));
  t.same(text, { sid: 'SM11111111111111111111111111111111', from: '+14155550100', to: '+14155550199', body: 'Do you open on Sundays?', mediaCount: 0, media: [], accountSid: ACCOUNT, segments: 1 });
  t.notOk(text && 'optOutType' in text, 'no OptOutType without Advanced Opt-Out');

  const mms = inboundSmsForm({
    from: '+4915112345678',
    to: '+4930123456',
    body: '',
    accountSid: ACCOUNT,
    messagingServiceSid: 'MG0123456789abcdef0123456789abcdef',
    media: [{ contentType: 'image/jpeg' }, { url: 'https://example.com/b.ogg', contentType: 'audio/ogg' }],
  });
  t.match(mms.get('MessageSid'), /^MM[0-9a-f]{32}$/, 'a message with media has an MM sid');
  for (const field of ['ToCountry', 'ToState', 'ToCity', 'ToZip', 'FromCountry', 'FromState', 'FromCity', 'FromZip', 'SmsMessageSid', 'SmsSid', 'SmsStatus', 'NumSegments', 'ApiVersion']) t.ok(mms.has(field), `the form carries ${field}`);
  const read = parseInboundSms(mms)!;
  t.equal(read.body, '');
  t.equal(read.mediaCount, 2);
  t.same(read.media, [
    { url: mms.get('MediaUrl0'), contentType: 'image/jpeg' },
    { url: 'https://example.com/b.ogg', contentType: 'audio/ogg' },
  ]);
  t.match(read.media[0]!.url, new RegExp(`^https://api\\.twilio\\.com/2010-04-01/Accounts/${ACCOUNT}/Messages/MM[0-9a-f]{32}/Media/ME[0-9a-f]{32}$`));
  t.equal(read.messagingServiceSid, 'MG0123456789abcdef0123456789abcdef');

  const stop = parseInboundSms(inboundSmsForm({ from: '+14155550100', to: '+14155550199', body: 'Arrêt', accountSid: ACCOUNT, messagingServiceSid: 'MG1', optOutType: 'STOP' }))!;
  t.equal(stop.optOutType, 'STOP');
  const odd = new URLSearchParams({ MessageSid: 'SM1', From: '+1', To: '+2', OptOutType: 'maybe', NumMedia: '-3' });
  t.same(parseInboundSms(odd), { sid: 'SM1', from: '+1', to: '+2', body: '', mediaCount: 0, media: [] }, 'unknown OptOutType and a bad NumMedia are ignored');

  for (const missing of ['MessageSid', 'From', 'To']) {
    const form = inboundSmsForm({ from: '+14155550100', to: '+14155550199', body: 'hi', accountSid: ACCOUNT });
    form.delete(missing);
    t.equal(parseInboundSms(form), null, `no ${missing}: not an incoming message`);
    form.set(missing, '+1415\u00005550100');
    t.equal(parseInboundSms(form), null, `a ${missing} holding U+0000 (none of Twilio's does): not an incoming message`);
  }
  t.equal(parseStatusCallback(new URLSearchParams({ MessageSid: 'SM\u00001', MessageStatus: 'delivered' })), null, 'nor a status callback');
});

t.test('status callbacks: every MessageStatus', async (t) => {
  const expected: Record<string, ReturnType<typeof parseStatusCallback>> = {
    queued: null,
    accepted: null,
    scheduled: null,
    sending: null,
    sent: { sid: 'SM1', status: 'sent' },
    delivered: { sid: 'SM1', status: 'delivered' },
    read: { sid: 'SM1', status: 'read' },
    undelivered: { sid: 'SM1', status: 'failed', error: '30003' },
    failed: { sid: 'SM1', status: 'failed', error: '30003' },
    canceled: { sid: 'SM1', status: 'failed', error: 'canceled' },
    receiving: null,
    partially_delivered: null,
  };
  for (const [status, outcome] of Object.entries(expected)) {
    const errorCode = status === 'undelivered' || status === 'failed' ? 30003 : undefined;
    t.same(parseStatusCallback(statusCallbackForm({ sid: 'SM1', status, to: '+14155550100', from: '+14155550199', errorCode })), outcome, status);
  }
  t.same(parseStatusCallback(statusCallbackForm({ sid: 'SM1', status: 'failed', to: '+1', from: '+2' })), { sid: 'SM1', status: 'failed', error: 'failed' }, 'a failure without a code names its status');
  t.equal(parseStatusCallback(new URLSearchParams({ MessageStatus: 'delivered' })), null, 'no sid');
  t.ok(statusCallbackForm({ sid: 'SM1', status: 'delivered', to: '+1', from: '+2' }).get('RawDlrDoneDate')?.match(/^\d{10}$/), 'a delivery receipt date on delivered');
});

t.test('keywords: the whole message, any case, punctuation around it', async (t) => {
  const words = { stop: ['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT', 'REVOKE', 'OPTOUT'], start: ['START', 'YES', 'UNSTOP'], help: ['HELP', 'INFO'] } as const;
  for (const [keyword, list] of Object.entries(words)) {
    for (const word of list) {
      t.equal(keywordOf(word), keyword, word);
      t.equal(keywordOf(word.toLowerCase()), keyword, word.toLowerCase());
      t.equal(keywordOf(`  ${word[0]}${word.slice(1).toLowerCase()} \n`), keyword, `${word} capitalised, spaces around`);
    }
  }
  for (const body of ['Stop.', 'STOP!', '"stop"', '¡Stop!', '...stop...', 'stop?!']) t.equal(keywordOf(body), 'stop', body);
  for (const body of ['Stop please', 'please stop', 'Please stop texting me.', 'stop all', 'stopp', 'non-stop', 'I said STOP', 'yes please', 'more info', '', '   ', '!!!', 'S T O P', 'stop 🛑']) {
    t.equal(keywordOf(body), null, JSON.stringify(body));
  }
  t.equal(inboundKeyword({ body: 'Arrêt', optOutType: 'STOP' }), 'stop', "Twilio's OptOutType first");
  t.equal(inboundKeyword({ body: 'stop', optOutType: 'HELP' }), 'help', 'OptOutType over the body');
  t.equal(inboundKeyword({ body: 'Cancel' }), 'stop', 'the body without OptOutType');
  t.equal(inboundKeyword({ body: 'Can I cancel my booking?' }), null);
});

t.test('replies are cut within 1,600 at boundaries, never inside a character', async (t) => {
  const words = (length: number) => {
    let text = '';
    while (text.length < length) text += 'word ';
    return text.slice(0, length);
  };
  const exact = words(1600).replace(/ $/, 'x');
  t.same(splitSms(exact), [exact], '1,600 characters: one message');
  t.same(splitSms(''), [], 'nothing: no message');
  t.same(splitSms(' \n\n '), [], 'blank: no message');

  const over = `${exact}y`;
  const parts = splitSms(over);
  t.equal(parts.length, 2, '1,601 characters: two messages');
  t.ok(parts.every((part) => part.length > 0 && part.length <= 1600));
  t.equal(parts.join(' '), over.replace(/\s+/g, ' '), 'cut at a space, nothing lost');
  t.ok(parts[0]!.endsWith('word') && parts[1]!.startsWith('word'), 'words kept whole');

  const paragraphs = `${words(1000).trim()}.\n\n${words(1000).trim()}`;
  t.same(splitSms(paragraphs).map((part) => part.length), [1000, 999], 'at the paragraph break');

  const sentences = `${words(900).trim()}. ${words(800).trim()} and so on`;
  const bySentence = splitSms(sentences);
  t.ok(bySentence[0]!.endsWith('.'), 'at the end of a sentence, not the last space');
  t.equal(bySentence[0]!.length, 900);

  const early = `Short first.\n\n${words(1700)}`;
  t.ok(splitSms(early)[0]!.length > 800, 'a break early in the part does not make a tiny message');

  const emoji = `${'a'.repeat(1599)}😀${'b'.repeat(10)}`;
  const aroundEmoji = splitSms(emoji);
  t.same(aroundEmoji, ['a'.repeat(1599), `😀${'b'.repeat(10)}`], 'an emoji across the limit moves whole to the next part');
  const family = `${'a'.repeat(1595)}👨‍👩‍👧‍👦${'c'.repeat(5)}`;
  t.equal(splitSms(family)[1]!.slice(0, 11), '👨‍👩‍👧‍👦', 'a joined emoji is not split');
  for (const part of [...aroundEmoji, ...splitSms(family)]) t.notOk(/[\uD800-\uDBFF]$|^[\uDC00-\uDFFF]/.test(part), 'no half surrogate pair');

  const long = 'x'.repeat(4000);
  t.same(splitSms(long).map((part) => part.length), [1600, 1600, 800], 'one long word: hard cuts at the limit');
  t.same(splitSms('ab😀cd', 3), ['ab', '😀c', 'd'], 'a small limit too');
  t.throws(() => splitSms('abc', 1), RangeError);
});

t.test('the Messages API client against the fake', async (t) => {
  const fake = await startTwilioMessagingFake({ accountSid: ACCOUNT, authToken: 'secret-token' });
  t.teardown(() => fake.close());
  const client = createTwilioMessaging({ apiUrl: `${fake.apiUrl}/`, accountSid: ACCOUNT, authToken: 'secret-token' });

  const answer = await client.send({ from: '+14155550199', to: '+14155550100', body: 'We open at 10 on Sundays.', statusCallback: 'https://platform.example/api/channels/twilio/sms/status' });
  t.match(answer, { sid: /^SM[0-9a-f]{32}$/, status: 'queued' });
  t.same(fake.sent, [{ from: '+14155550199', to: '+14155550100', body: 'We open at 10 on Sundays.', statusCallback: 'https://platform.example/api/channels/twilio/sms/status', sid: answer.sid }]);
  t.equal(fake.requests[0]!.authorization, `Basic ${Buffer.from(`${ACCOUNT}:secret-token`).toString('base64')}`);
  t.equal(fake.requests[0]!.path, `/2010-04-01/Accounts/${ACCOUNT}/Messages.json`);
  t.same([...fake.requests[0]!.form.keys()].sort(), ['Body', 'From', 'StatusCallback', 'To']);
  await client.send({ from: '+14155550199', to: '+14155550100', body: 'No callback' });
  t.notOk(fake.requests[1]!.form.has('StatusCallback'), 'no StatusCallback when none is given');

  const refusal = async (send: Promise<unknown>) => {
    const error = await send.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    if (!(error instanceof TwilioMessagingError)) throw new Error(`expected a TwilioMessagingError, got ${String(error)}`);
    t.ok(error instanceof ChannelError, 'a ChannelError');
    return error;
  };

  const badAuth = await refusal(createTwilioMessaging({ apiUrl: fake.apiUrl, accountSid: ACCOUNT, authToken: 'wrong' }).send({ from: '+1', to: '+2', body: 'x' }));
  t.match(badAuth, { retryable: false, status: 401, code: 20003, message: 'Twilio Messaging refused the message (HTTP 401, code 20003: Authenticate)' });

  fake.optOut('+14155550100');
  const unsubscribed = await refusal(client.send({ from: '+14155550199', to: '+14155550100', body: 'Hello?' }));
  t.match(unsubscribed, { retryable: false, status: 400, code: TWILIO_UNSUBSCRIBED, message: /HTTP 400, code 21610: Attempt to send to unsubscribed recipient/ });
  fake.optIn('+14155550100');

  fake.failNext(1, 500);
  t.match(await refusal(client.send({ from: '+14155550199', to: '+14155550100', body: 'x' })), { retryable: true, status: 500, code: 20500, message: /HTTP 500/ });
  fake.failNext(1, 429);
  t.match(await refusal(client.send({ from: '+14155550199', to: '+14155550100', body: 'x' })), { retryable: true, status: 429 });
  fake.failNext(1, 400, { code: 21211, message: "Invalid 'To' Phone Number" });
  t.match(await refusal(client.send({ from: '+14155550199', to: 'nonsense', body: 'x' })), { retryable: false, status: 400, code: 21211 });
  t.match(await refusal(client.send({ from: '+14155550199', to: '+14155550100', body: 'y'.repeat(1601) })), { retryable: false, code: 21617 }, 'the fake holds bodies to the limit');

  const waited = fake.waitForSent(4);
  t.equal(fake.sent.length, 2, 'failures are not sent');
  await Promise.all([client.send({ from: '+14155550199', to: '+14155550100', body: 'three' }), client.send({ from: '+14155550199', to: '+14155550100', body: 'four' })]);
  await waited;
  t.same(fake.sent.slice(2).map((sms) => sms.body).sort(), ['four', 'three']);

  // A port nothing listens on: found free, then released.
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
  const unreachable = await refusal(createTwilioMessaging({ apiUrl: `http://127.0.0.1:${port}`, accountSid: ACCOUNT, authToken: 'secret-token' }).send({ from: '+1', to: '+2', body: 'x' }));
  t.match(unreachable, { retryable: true, status: undefined, message: 'Twilio Messaging could not be reached' });
  t.ok(unreachable.cause, 'the network error is kept as the cause');

  // An API that takes the request and never answers: given up after the time limit, worth retrying.
  const silent = createServer((socket) => socket.on('error', () => {})).listen(0, '127.0.0.1');
  await new Promise((resolve) => silent.once('listening', resolve));
  t.teardown(() => {
    silent.close();
  });
  const started = Date.now();
  const slow = createTwilioMessaging({ apiUrl: `http://127.0.0.1:${(silent.address() as { port: number }).port}`, accountSid: ACCOUNT, authToken: 'secret-token', timeoutMs: 200 });
  t.match(await refusal(slow.send({ from: '+1', to: '+2', body: 'x' })), { retryable: true, status: undefined, cause: { name: 'TimeoutError' } });
  t.ok(Date.now() - started < 5_000, 'within its time limit');
});

t.test("the signature over a builder's form is Twilio's", async (t) => {
  const url = 'https://platform.example/api/channels/twilio/sms?channel=1';
  const form = inboundSmsForm({ from: '+14155550100', to: '+14155550199', body: 'Hi & bye = 2', accountSid: ACCOUNT, media: [{ contentType: 'image/png' }] });
  const names = [...new Set(form.keys())].sort();
  const expected = createHmac('sha1', 'secret-token')
    .update(url + names.map((name) => name + form.get(name)).join(''))
    .digest('base64');
  const signature = signTwilio('secret-token', url, form);
  t.equal(signature, expected);
  t.ok(twilioSignatureMatches('secret-token', url, form, signature));
  t.notOk(twilioSignatureMatches('other-token', url, form, signature), 'another token');
  t.notOk(twilioSignatureMatches('secret-token', `${url}&x=1`, form, signature), 'another URL');
  const tampered = new URLSearchParams(form);
  tampered.set('Body', 'Hi & bye = 3');
  t.notOk(twilioSignatureMatches('secret-token', url, tampered, signature), 'another body');
  t.notOk(twilioSignatureMatches('secret-token', url, form, undefined), 'no header');
});
