import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { startTestPlatform } from './helpers/platform.js';
import { readWav, speechStats } from './helpers/speechAudio.js';

/**
 * Voice previews (`preview_url` of the voice catalog), with the dev voice speaking (espeak-ng):
 * 1. Every voice's `preview_url` is the absolute URL of its sample on the public route.
 * 2. The sample is a valid mono 16 kHz PCM16 WAV of spoken words ("Hello, I'm Rachel. How can I
 *    help you today?") of a plausible length, served as audio/wav without a token.
 * 3. It is rendered once: a second request is the same file from DATA_DIR, and concurrent requests
 *    for a voice not yet rendered wait for one rendering.
 * 4. A German voice says its sample in German (other audio than the English one).
 * 5. An unknown voice is 404 `{message: "Voice not found."}`.
 */

const renders: Array<Record<string, unknown>> = [];
const api = await startTestPlatform(t, { devVoice: 'espeak' }, {}, (line) => {
  if (line.msg === 'voice preview rendered') renders.push(line);
});
const user = await api.user();

const fetchPreview = async (url: string) => {
  const response = await fetch(url);
  return { status: response.status, type: response.headers.get('content-type'), bytes: Buffer.from(await response.arrayBuffer()) };
};

t.test('preview_url is the absolute URL of the public sample route', async (t) => {
  const voices = await api.request('GET', '/user/assistants/voices', { token: user.token });
  t.equal(voices.status, 200);
  for (const voice of voices.body.data as Array<{ id: number; preview_url: string }>) {
    t.equal(voice.preview_url, `${api.origin}/api/voices/${voice.id}/preview.wav`, `voice ${voice.id}`);
  }
});

t.test('the sample is a WAV of spoken words, rendered once and served from DATA_DIR after', async (t) => {
  const url = `${api.origin}/api/voices/1/preview.wav`;
  const first = await fetchPreview(url);
  t.equal(first.status, 200);
  t.equal(first.type, 'audio/wav');
  const wav = readWav(first.bytes);
  t.match(wav, { riff: 'RIFF', wave: 'WAVE', format: 1, channels: 1, sampleRate: 16_000, bits: 16 });
  t.equal(wav.dataBytes, first.bytes.length - 44, 'the data fills the file');
  const stats = speechStats(wav.samples);
  t.ok(stats.seconds > 1.5 && stats.seconds < 6, `a short greeting (${stats.seconds.toFixed(2)} s)`);
  t.ok(stats.loudFrames > 40, 'audible');
  t.ok(stats.crossingVariation > 0.35 && stats.fricativeFrames > 0, `spoken words, not a tone (${JSON.stringify(stats)})`);
  t.equal(renders.length, 1, 'rendered once');
  t.match(renders[0], { voiceId: 1, provider: 'dev' });

  const second = await fetchPreview(url);
  t.equal(second.status, 200);
  t.ok(second.bytes.equals(first.bytes), 'the same sample');
  t.equal(renders.length, 1, 'not rendered again');
  const files = await readdir(join(api.config.dataDir, 'voice-previews'));
  t.same(files.filter((f) => f.startsWith('1-') && f.endsWith('.wav')).length, 1, 'kept under DATA_DIR');
});

t.test('concurrent requests for a new voice wait for one rendering; a German voice speaks German', async (t) => {
  const english = await fetchPreview(`${api.origin}/api/voices/1/preview.wav`);
  const before = renders.length;
  const answers = await Promise.all([1, 2, 3, 4].map(() => fetchPreview(`${api.origin}/api/voices/6/preview.wav`)));
  t.same(answers.map((a) => a.status), [200, 200, 200, 200]);
  t.ok(answers.every((a) => a.bytes.equals(answers[0]!.bytes)), 'one sample for all');
  t.equal(renders.length, before + 1, 'one rendering');
  const german = readWav(answers[0]!.bytes);
  t.ok(speechStats(german.samples).fricativeFrames > 0, 'spoken');
  t.not(german.dataBytes, english.bytes.length - 44, 'not the English sample');
});

t.test('an unknown voice is 404 in the message shape', async (t) => {
  for (const id of ['999', '0', 'abc']) {
    const response = await api.request('GET', `//api/voices/${id}/preview.wav`);
    t.equal(response.status, 404, id);
    t.same(response.body, { message: 'Voice not found.' }, id);
  }
});
