import t from 'tap';
import { createLogger } from '../runtime/logger.js';
import { createDevTts, espeakVoice } from '../runtime/voice/providers/dev.js';
import { EspeakSynthesizer } from '../runtime/voice/providers/espeak.js';
import type { TtsProvider } from '../runtime/voice/providers/types.js';
import { concatSamples, speechStats } from './helpers/speechAudio.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * The dev voice speaks the words (espeak-ng in a worker thread):
 * 1. Its audio is speech, not a tone: the zero-crossing rate of its frames varies as voiced sounds
 *    and fricatives alternate (the tone, measured the same way, does not), and its length grows
 *    with the words.
 * 2. It speaks the catalog voice's language (German is other audio than English), female and male
 *    voices get espeak's variants, and a language espeak lacks is spoken in English.
 * 3. Synthesis runs off the event loop: the main thread stays mostly idle while a paragraph is
 *    synthesized; the cost per second of speech is reported.
 * 4. Aborting a sentence stops its audio.
 * 5. In a pipeline call (the voice) and a multimodal one (the dev realtime model's own voice), the
 *    caller hears the greeting spoken, whole, and the transcript has its words.
 * 6. A synthesizer that cannot load is logged once and the dev voice hums the tone instead.
 */

const logger = createLogger('silent');
const synthesizer = new EspeakSynthesizer(logger);
t.teardown(() => synthesizer.close());
const voice = createDevTts({ synthesizer, genderOf: async (id) => (id === 'rachel' ? 'female' : id === 'adam' ? 'male' : undefined) });
const tone = createDevTts();

async function say(tts: TtsProvider, text: string, options: { language?: string; voice?: string; signal?: AbortSignal } = {}): Promise<Int16Array> {
  const chunks: Int16Array[] = [];
  const signal = options.signal ?? new AbortController().signal;
  for await (const chunk of tts.synthesize({ text, voice: options.voice ?? 'rachel', language: options.language ?? 'en', speed: 1, stability: 0.5, similarity: 0.75, emotion: false, signal })) chunks.push(chunk);
  return concatSamples(chunks);
}

const LONG = 'Returns are accepted within thirty days, so please keep your receipt and the original packaging safe until then.';

t.test('the audio is speech whose length grows with the words', async (t) => {
  const short = speechStats(await say(voice, 'Hello there.'));
  const long = speechStats(await say(voice, LONG));
  t.ok(long.crossingVariation > 0.5 && long.fricativeFrames > 10, `speech: voiced sounds and fricatives alternate (${JSON.stringify(long)})`);
  t.ok(long.seconds > 4 && long.seconds < 10, `about the time the words take (${long.seconds.toFixed(2)} s)`);
  t.ok(long.seconds > 3 * short.seconds, `longer for more words (${short.seconds.toFixed(2)} s and ${long.seconds.toFixed(2)} s)`);
  const hummed = speechStats(await say(tone, LONG));
  t.ok(hummed.crossingVariation < 0.3 && hummed.fricativeFrames === 0, `the tone fails the same measure (${JSON.stringify(hummed)})`);
});

t.test("the catalog voice's language and gender", async (t) => {
  t.same(espeakVoice('en', 'rachel', 'female').voice.replace(/\d$/, ''), 'en-us+f');
  t.same(espeakVoice('de', 'adam', 'male').voice.replace(/\d$/, ''), 'de+m');
  t.same(espeakVoice('no', 'x', 'neutral').voice, 'nb');
  t.same(espeakVoice('zh', 'x', undefined).voice, 'cmn');
  const sentence = 'Guten Tag, wie kann ich Ihnen heute helfen?';
  const german = await say(voice, sentence, { language: 'de' });
  const english = await say(voice, sentence, { language: 'en' });
  t.ok(speechStats(german).fricativeFrames > 0, 'German is spoken');
  t.ok(Math.abs(german.length - english.length) > 1_600, `German and English read it differently (${german.length} and ${english.length} samples)`);
  const male = await say(voice, 'Hello there, how are you?', { voice: 'adam' });
  const female = await say(voice, 'Hello there, how are you?', { voice: 'rachel' });
  t.not(male.length, female.length, 'two voices');
  const unknown = speechStats(await say(voice, 'Hello there, how are you?', { language: 'zz' }));
  t.ok(unknown.loudFrames > 40 && unknown.crossingVariation > 0.35, `a language espeak lacks is spoken in English (${JSON.stringify(unknown)})`);
});

t.test('synthesis runs off the event loop', async (t) => {
  const paragraph = `${LONG} ${LONG} ${LONG}`;
  const before = { ms: synthesizer.synthMs, samples: synthesizer.samples };
  const started = performance.eventLoopUtilization();
  const audio = await say(voice, paragraph);
  const used = performance.eventLoopUtilization(started);
  t.ok(audio.length > 16_000 * 12, 'a paragraph of speech');
  t.ok(used.utilization < 0.5, `the main thread mostly waited (event loop utilisation ${used.utilization.toFixed(2)})`);
  const seconds = (synthesizer.samples - before.samples) / 16_000;
  t.comment(`synthesis cost: ${((synthesizer.synthMs - before.ms) / seconds).toFixed(1)} ms of the worker thread per second of speech`);
});

t.test('aborting a sentence stops its audio', async (t) => {
  const abort = new AbortController();
  const chunks: Int16Array[] = [];
  for await (const chunk of voice.synthesize({ text: `${LONG} ${LONG} ${LONG}`, voice: 'rachel', language: 'en', speed: 1, stability: 0.5, similarity: 0.75, emotion: false, signal: abort.signal })) {
    chunks.push(chunk);
    abort.abort();
  }
  t.ok(concatSamples(chunks).length < 16_000 * 4, 'stopped within a clause');
});

const multimodal = { mode: 'multimodal', voice_id: 31, multimodal_model_id: 24, llm_model_id: null, knowledgebase_mode: 'function_call' };

for (const [mode, fields] of [['pipeline', {}], ['multimodal', multimodal]] as const) t.test(`in a ${mode} call, the caller hears the greeting spoken`, async (t) => {
  const s = await voiceSetup(t, { ...fields, initial_message: 'Hello, this is Bot. How can I help you today?' }, { config: { devVoice: 'espeak' } });
  // The thread is loaded before the call, as it is by any earlier call or preview.
  await fetch(`${s.api.origin}/api/voices/1/preview.wav`).then((response) => response.arrayBuffer());
  const { phone, callId } = await callIn(s);
  const heard: Int16Array[] = [];
  phone.phone.on('audio', (frame) => heard.push(frame));
  await phone.until(() => phone.heard.marks.length >= 1, 30_000, 'the whole greeting');
  phone.phone.hangUp();
  const stats = speechStats(concatSamples(heard));
  t.ok(stats.crossingVariation > 0.35 && stats.fricativeFrames > 0, `spoken words over the phone line (${JSON.stringify(stats)})`);
  t.ok(stats.loudFrames > 80, 'the whole greeting');
  t.equal((await endedCall(s, callId)).transcript, 'assistant: Hello, this is Bot. How can I help you today?');
});

t.test('a synthesizer that cannot load: logged once, and the dev voice hums', async (t) => {
  const lines: string[] = [];
  const broken = new EspeakSynthesizer(createLogger('info', { write: (line: string) => lines.push(line) }), new URL('./fakes/brokenSpeechWorker.mjs', import.meta.url));
  t.teardown(() => broken.close());
  const fallback = createDevTts({ synthesizer: broken });
  const first = speechStats(await say(fallback, LONG));
  const second = speechStats(await say(fallback, 'Hello there.'));
  t.ok(first.seconds > 4 && first.fricativeFrames === 0, 'the tone, of the right length');
  t.ok(second.seconds > 0.5, 'again');
  t.equal(lines.filter((line) => line.includes('the speech synthesizer could not be loaded')).length, 1, 'logged once');
});
