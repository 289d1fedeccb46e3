import t from 'tap';
import { signRecording } from '../runtime/calls/recording.js';
import { levelDb } from '../runtime/voice/audio.js';
import { withClient } from './helpers/database.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * Recordings: a stereo WAV written during the call (caller left, agent right) of the call's
 * length, served at a signed expiring URL with byte ranges, and named in the webhook payload.
 */

t.test('a recorded call: valid WAV of the right length, both sides, signed URL with ranges, webhook', async (t) => {
  const s = await voiceSetup(t, { record: true, is_webhook_active: true, webhook_url: 'http://127.0.0.1:9/hook', send_webhook_only_on_completed: false }, { config: { outboundAllowPrivate: true } });
  const { phone, callId } = await callIn(s, ['Hello there.']);
  const start = phone.elapsed;
  await phone.untilAgentDone();
  const talkAt = phone.elapsed - start;
  await phone.talk(1_000);
  await phone.until(() => phone.heard.speechFrames > 100, 5_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const answeredMs = phone.elapsed - start;
  const call = await endedCall(s, callId);
  t.match(call.recording_url, new RegExp(`^http://127\\.0\\.0\\.1:\\d+/api/recordings/${callId}\\.wav\\?expires=\\d+&signature=[0-9a-f]{64}$`));

  const response = await fetch(call.recording_url);
  t.equal(response.status, 200);
  t.equal(response.headers.get('content-type'), 'audio/wav');
  t.equal(response.headers.get('accept-ranges'), 'bytes');
  const wav = Buffer.from(await response.arrayBuffer());
  t.equal(wav.toString('ascii', 0, 4), 'RIFF');
  t.equal(wav.toString('ascii', 8, 12), 'WAVE');
  t.equal(wav.readUInt16LE(20), 1, 'PCM');
  t.equal(wav.readUInt16LE(22), 2, 'stereo');
  t.equal(wav.readUInt32LE(24), 16_000);
  t.equal(wav.readUInt32LE(4), wav.length - 8, 'RIFF size');
  const dataBytes = wav.readUInt32LE(40);
  t.equal(dataBytes, wav.length - 44, 'data size');
  const recordedMs = (dataBytes / 64_000) * 1000;
  t.ok(Math.abs(recordedMs - answeredMs) <= 100, `${recordedMs} ms recorded for a call of ${answeredMs} ms`);
  const channel = (side: 0 | 1, fromMs: number, toMs: number) => {
    const samples = new Int16Array(Math.floor((toMs - fromMs) * 16));
    for (let i = 0; i < samples.length; i++) samples[i] = wav.readInt16LE(44 + (Math.floor(fromMs * 16) + i) * 4 + side * 2);
    return levelDb(samples);
  };
  t.ok(channel(1, 100, 900) > -35, 'the greeting is on the agent channel');
  t.ok(channel(0, 100, 900) < -60, 'the caller is silent meanwhile');
  t.ok(channel(0, talkAt + 100, talkAt + 900) > -35, 'the caller is on the caller channel');

  const head = await fetch(call.recording_url, { headers: { range: 'bytes=0-43' } });
  t.equal(head.status, 206);
  t.equal(head.headers.get('content-range'), `bytes 0-43/${wav.length}`);
  t.same(Buffer.from(await head.arrayBuffer()), wav.subarray(0, 44));
  const tail = await fetch(call.recording_url, { headers: { range: 'bytes=-100' } });
  t.equal(tail.status, 206);
  t.same(Buffer.from(await tail.arrayBuffer()), wav.subarray(wav.length - 100));
  const beyond = await fetch(call.recording_url, { headers: { range: `bytes=${wav.length}-` } });
  t.equal(beyond.status, 416);
  t.equal(beyond.headers.get('content-range'), `bytes */${wav.length}`);

  const url = new URL(call.recording_url);
  url.searchParams.set('signature', '0'.repeat(64));
  t.equal((await fetch(url)).status, 403, 'a wrong signature');
  const past = Math.floor(s.clock.now() / 1000) - 10;
  const expired = `${s.api.origin}/api/recordings/${callId}.wav?expires=${past}&signature=${signRecording(s.api.platform.runtime.recordings.secret, callId, past)}`;
  const refused = await fetch(expired);
  t.equal(refused.status, 403, 'an expired link');
  t.same(await refused.json(), { message: 'The recording link is invalid or has expired.' });

  const payload = await withClient(s.api.databaseUrl, async (db) => JSON.parse((await db.query('SELECT body FROM webhook_deliveries WHERE call_id = $1', [callId])).rows[0].body));
  t.match(payload.recording_url, new RegExp(`/api/recordings/${callId}\\.wav\\?expires=`));

  const { callIn: again } = await import('./helpers/voice.js');
  const unrecorded = await voiceSetup(t);
  const other = await again(unrecorded);
  other.phone.phone.hangUp();
  t.equal((await endedCall(unrecorded, other.callId)).recording_url, null, 'record false: no recording');
  const later = Math.floor(unrecorded.clock.now() / 1000) + 60;
  const none = await fetch(`${unrecorded.api.origin}/api/recordings/${other.callId}.wav?expires=${later}&signature=${signRecording(unrecorded.api.platform.runtime.recordings.secret, other.callId, later)}`);
  t.equal(none.status, 404, 'a validly signed link to a call without a recording');
  t.same(await none.json(), { message: 'Recording not found.' });
  t.equal((await fetch(`${unrecorded.api.origin}/api/recordings/notanumber.wav?expires=${later}&signature=x`)).status, 403);
});

t.test('a long recording is sent whole, streamed; ranges anywhere in it; a download abandoned midway', async (t) => {
  const s = await voiceSetup(t, { record: true });
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  // What a 20-minute call weighs (16 kHz stereo PCM16), in place of the short one recorded.
  const { writeFile } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const relative = await withClient(s.api.databaseUrl, async (db) => (await db.query('SELECT recording_path FROM calls WHERE id = $1', [callId])).rows[0].recording_path as string);
  const big = Buffer.alloc(77 * 1024 * 1024);
  for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE(i, i);
  await writeFile(join(s.api.platform.runtime.recordings.dir, relative), big);

  const whole = await fetch(call.recording_url);
  t.equal(whole.status, 200, 'no Range asked, no partial answer');
  t.equal(whole.headers.get('content-length'), String(big.length));
  t.ok(Buffer.from(await whole.arrayBuffer()).equals(big), 'every byte');
  const late = await fetch(call.recording_url, { headers: { range: 'bytes=70000000-70000099' } });
  t.equal(late.status, 206);
  t.ok(Buffer.from(await late.arrayBuffer()).equals(big.subarray(70_000_000, 70_000_100)));

  // A client that keeps pausing: the socket backs up again and again, and every byte still arrives.
  const { get } = await import('node:http');
  const slow = await new Promise<Buffer>((resolve, reject) => {
    get(call.recording_url, (response) => {
      const parts: Buffer[] = [];
      let sincePause = 0;
      response.on('data', (part: Buffer) => {
        parts.push(part);
        sincePause += part.length;
        if (sincePause > 256 * 1024) {
          sincePause = 0;
          response.pause();
          setTimeout(() => response.resume(), 5);
        }
      });
      response.on('end', () => resolve(Buffer.concat(parts)));
      response.on('error', reject);
    }).on('error', reject);
  });
  t.ok(slow.equals(big), 'a reader that keeps pausing gets every byte');

  const abandoned = new AbortController();
  const reader = (await fetch(call.recording_url, { signal: abandoned.signal })).body!.getReader();
  await reader.read();
  abandoned.abort();
  await reader.read().catch(() => undefined);
  t.equal((await s.api.request('GET', '//health')).status, 200, 'the server carries on');
});
