/**
 * A voice vendor that goes quiet mid-sentence (headers and some audio, then nothing) fails the
 * segment after the stall time with a clear error, for ElevenLabs and OpenAI TTS alike; one that
 * keeps sending is not cut off, and a cancelled request stays a cancellation.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { Conditions } from './helpers/conditions.js';
import { createElevenLabsTts } from '../runtime/voice/providers/elevenlabs.js';
import { createOpenAiTts } from '../runtime/voice/providers/openaiTts.js';

const held: ServerResponse[] = [];
const holding = new Conditions();
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'audio/pcm' });
    res.write(Buffer.alloc(640));
    if ((req.url ?? '').includes('steady')) {
      let sent = 0;
      const more = setInterval(() => {
        res.write(Buffer.alloc(640));
        if (++sent === 20) {
          clearInterval(more);
          res.end();
        }
      }, 40);
    } else {
      held.push(res);
      holding.changed();
    }
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
t.teardown(() => {
  for (const res of held) res.destroy();
  server.close();
});

const request = (voice: string, signal = new AbortController().signal) => ({ text: 'Hello there.', voice, language: 'en', speed: 1, stability: 0.5, similarity: 0.75, emotion: false, signal });
async function drain(chunks: AsyncIterable<Int16Array>): Promise<number> {
  let samples = 0;
  for await (const chunk of chunks) samples += chunk.length;
  return samples;
}

t.test('a stalled voice fails with a clear error', async (t) => {
  await t.rejects(drain(createElevenLabsTts({ apiKey: 'k', url, stallMs: 100 }).synthesize(request('held'))), /ElevenLabs sent no audio for/);
  await t.rejects(drain(createOpenAiTts({ apiKey: 'k', url: `${url}/v1`, stallMs: 100 }).synthesize(request('held'))), /OpenAI TTS sent no audio for/);
});

t.test('a steady one is not cut off', async (t) => {
  // 800 ms of audio in chunks 40 ms apart, twice the stall time: a gap ten times the chunks' may
  // pass on a loaded machine, a stall as a whole may not.
  t.equal(await drain(createElevenLabsTts({ apiKey: 'k', url, stallMs: 400 }).synthesize(request('steady'))), 21 * 320);
});

t.test('a cancelled request is not a stall', async (t) => {
  const cancel = new AbortController();
  const before = held.length;
  const pending = drain(createElevenLabsTts({ apiKey: 'k', url, stallMs: 60_000 }).synthesize(request('held', cancel.signal)));
  // Cancelled while the vendor holds the response, as a barge-in would.
  await holding.until(() => held.length > before);
  cancel.abort();
  const outcome = await pending.then(
    () => 'ended',
    (error: Error) => error.message,
  );
  t.notMatch(outcome, /sent no audio/);
});
