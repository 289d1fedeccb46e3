import t from 'tap';
import { plivoSignature } from '../api/routes/carriers/plivo.js';
import { dialXml, plivoAnswer } from '../runtime/calls/carriers/plivo.js';
import { Downsampler, FRAME_SAMPLES, Upsampler, mulawEncode } from '../runtime/voice/audio.js';
import { plivoFormat } from '../runtime/voice/serializers/plivo.js';
import { plivoDial, plivoStream, plivoV3 } from './fakes/plivo.js';

/**
 * Plivo's wire formats, alone (the calls over them run in calls_carriers.test.ts):
 * 1. The V3 webhook signature equals what Plivo's SDK algorithm computes (vectors made with it),
 *    with and without a query and a body, and the fake's own writing of it agrees.
 * 2. The Audio Streams codec: `media` in (fast path and parsed) as 16 kHz audio, `dtmf`,
 *    `playedStream` as a mark; `start`, `clearedAudio`, an outbound echo and garbage mean
 *    nothing; `playAudio` out is exactly the mu-law of the frame; `checkpoint` and `clearAudio`
 *    name the stream, and are not sent before `start` has named it.
 * 3. A close with a handshake is the caller hanging up; a dropped connection (1006) is not.
 * 4. The XML: `<Stream>` bidirectional, mu-law 8 kHz, alone, its URL escaped and carrying the
 *    call's id and token; refusals speak and hang up; a transfer dials the number without `+`.
 * (Its configuration is tested with the rest in config.test.ts.)
 */

const decode = (codec: ReturnType<typeof plivoFormat.codec>, message: unknown) => codec.decode(new TextEncoder().encode(typeof message === 'string' ? message : JSON.stringify(message)).buffer as ArrayBuffer, false);
const tone = (index: number) => Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => Math.round(Math.sin((2 * Math.PI * 300 * (index * FRAME_SAMPLES + i)) / 16_000) * 6_000));

t.test("the V3 signature is Plivo's", async (t) => {
  const token = 'MY_AUTH_TOKEN';
  const nonce = '05429567804466091622';
  // Computed with a port of plivo-python's utils/signature_v3.py (construct_post_url, get_signature_v3).
  const vectors: Array<[string, Record<string, string>, string]> = [
    ['https://example.com/api/telephony/plivo/status?call_id=42&b=x%20y', { CallUUID: 'c7a4d6a2-1111-4a5b-9c1d-2e3f4a5b6c7d', CallStatus: 'completed', To: '14155550123', Duration: '12' }, '+/czrFPPRk41HqEMJ/oYSZQRmG036vk+i2KRjCG7pdY='],
    ['https://example.com/api/telephony/plivo/inbound', { From: '14155550199', To: '14155550123', CallUUID: 'abc', Direction: 'inbound' }, 'ciGBtGl2y6lt5ZYICG7jz4pmxa12i/Xutm2+ms6vdQE='],
    ['https://example.com:8443/api/telephony/plivo/answer?token=a-b_c&call_id=7', {}, 'Mgei7CkkhOCe7Gp1V7p2BRFrHXrsryDJmdfbkWCovH8='],
    ['https://example.com/x', {}, 'sCTb3heIBg96FgD6Z3qw/C7cKqvaBZmQZMrAr3q6xJY='],
  ];
  for (const [url, fields, expected] of vectors) {
    const params = new URLSearchParams(fields);
    t.equal(plivoSignature(token, url, params, nonce), expected, url);
    t.equal(plivoV3(token, url, params, nonce), expected, `the fake agrees: ${url}`);
  }
  const [url, fields] = vectors[0]!;
  t.not(plivoSignature(token, url, new URLSearchParams({ ...fields, CallStatus: 'busy' }), nonce), vectors[0]![2], 'another body, another signature');
  t.not(plivoSignature(token, url, new URLSearchParams(fields), 'another-nonce'), vectors[0]![2], 'another nonce, another signature');
});

t.test('the Audio Streams codec', async (t) => {
  const codec = plivoFormat.codec();
  t.equal(codec.mark('greeting'), undefined, 'no checkpoint before the stream is named');
  t.equal(codec.clear(), undefined, 'no clear before the stream is named');
  const streamId = '87654321-4321-4321-4321-cba987654321';
  t.equal(decode(codec, { event: 'start', sequenceNumber: 1, start: { callId: '12345678-1234-1234-1234-123456789abc', streamId, accountId: 'MAXX', tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000 } }, extra_headers: '' }), undefined);
  t.same(JSON.parse(String(codec.mark('greeting')!.data)), { event: 'checkpoint', streamId, name: 'greeting' });
  t.same(JSON.parse(String(codec.clear()!.data)), { event: 'clearAudio', streamId });

  const mulaw = mulawEncode(new Downsampler().process(tone(0)));
  const expected = new Upsampler().processMulaw(mulaw).slice();
  const media = { event: 'media', sequenceNumber: 2, streamId, media: { track: 'inbound', timestamp: '1705312200000', chunk: 1, payload: mulaw.toString('base64') }, extra_headers: '' };
  const fast = decode(codec, media);
  t.equal(fast?.type, 'audio');
  t.equal(fast?.type === 'audio' && fast.samples.length, FRAME_SAMPLES, '20 ms at 16 kHz');
  t.same(fast?.type === 'audio' && Array.from(fast.samples), Array.from(expected), 'the mu-law decoded and upsampled');
  const spaced = decode(plivoFormat.codec(), JSON.stringify(media, null, 1));
  t.same(spaced?.type === 'audio' && Array.from(spaced.samples), Array.from(expected), 'pretty-printed JSON takes the parsed path');
  t.equal(decode(codec, { ...media, media: { ...media.media, track: 'outbound' } }), undefined, 'an outbound track is not the caller');
  t.same(decode(codec, { event: 'dtmf', sequenceNumber: 3, streamId, dtmf: { track: 'inbound', digit: '5', timestamp: '1' }, extra_headers: '' }), { type: 'dtmf', digit: '5' });
  t.same(decode(codec, { event: 'playedStream', sequenceNumber: 4, streamId, name: 'greeting' }), { type: 'mark', name: 'greeting' });
  t.equal(decode(codec, { event: 'clearedAudio', sequenceNumber: 5, streamId }), undefined);
  for (const garbage of ['not json', 'null', '[]', '{"event":"playedStream"}', '{"event":"media","media":{"payload":7}}']) t.equal(decode(codec, garbage), undefined, garbage);
  t.equal(codec.decode(new Uint8Array([1, 2, 3]).buffer, true), undefined, 'binary messages are not Plivo');

  const reference = new Downsampler();
  for (let index = 0; index < 3; index++) {
    const frame = tone(index);
    const out = codec.audio(frame);
    t.notOk(out.binary);
    t.same(JSON.parse(Buffer.from(out.data as Uint8Array).toString('utf8')), { event: 'playAudio', media: { contentType: 'audio/x-mulaw', sampleRate: 8000, payload: mulawEncode(reference.process(frame)).toString('base64') } }, `playAudio ${index}`);
  }
});

t.test('a closing handshake is the caller hanging up; a dropped connection is not', async (t) => {
  t.ok(plivoFormat.hangUpOnClose?.(1000));
  t.ok(plivoFormat.hangUpOnClose?.(1005));
  t.notOk(plivoFormat.hangUpOnClose?.(1006));
  t.equal(plivoFormat.claim, 'query', 'the URL names the call');
});

t.test('the XML', async (t) => {
  const status = 'https://example.com/api/telephony/plivo/status?call_id=7&x=1';
  const answer = plivoAnswer({ kind: 'stream', streamUrl: 'wss://example.com/ws/telephony/plivo', callId: 7, token: 'a-b_c' }, status);
  t.match(answer.contentType, /^text\/xml/);
  t.match(answer.body, /^<\?xml version="1.0" encoding="UTF-8"\?><Response><Stream [^>]+>[^<]+<\/Stream><\/Response>$/, 'the stream alone');
  t.same(plivoStream(answer.body), { url: 'wss://example.com/ws/telephony/plivo?call_id=7&token=a-b_c', statusCallbackUrl: status });
  t.match(answer.body, /&amp;token=/, 'the URL escaped');
  t.equal(plivoAnswer({ kind: 'refuse', text: 'Sorry & goodbye <now>' }, '').body, '<?xml version="1.0" encoding="UTF-8"?><Response><Speak>Sorry &amp; goodbye &lt;now&gt;</Speak><Hangup/></Response>');
  t.equal(plivoAnswer({ kind: 'hangup' }, '').body, '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>');
  t.match(dialXml('+14155550123'), /<Dial><Number>14155550123<\/Number><\/Dial>/);
  t.equal(plivoDial(dialXml('+14155550123')), '+14155550123');
});
