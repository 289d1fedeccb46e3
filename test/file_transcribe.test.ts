import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import t from 'tap';
import { findAssistantWithTools, type AssistantWithTools } from '../runtime/assistants/repository.js';
import type { SpeechVendors } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';
import { createFileTranscriber } from '../runtime/voice/providers/fileTranscriber.js';
import { TranscriptionFailed } from '../runtime/voice/providers/wire.js';
import { startFakeSpeech } from './fakes/speech.js';
import { startFakeTranscriber } from './fakes/transcribe.js';
import { startTestPlatform } from './helpers/platform.js';

/**
 * Voice messages (recorded audio files) transcribed with the assistant's transcriber, against fakes
 * speaking the vendors' wire formats, with assistants and the catalog from a real platform:
 * 1. openai: the file goes as it came (bytes and content type unchanged) in one multipart
 *    `/audio/transcriptions` request named after its type, with model, the assistant's language and
 *    `response_format=json`, the key as a bearer token; the text comes back trimmed. With secondary
 *    languages, no language is sent (the server detects it).
 * 2. azure: the deployment's URL with `api-version`, the `api-key` header, the deployment as model.
 * 3. deepgram: the pre-recorded API on the HTTP origin of DEEPGRAM_URL, `model=nova-3`,
 *    `smart_format=true`, the language (`multi` with secondary languages), `Token` key, the file as
 *    the body with its own content type; the transcript comes back.
 * 4. an assistant without a transcriber of its own is heard by its language's default (English:
 *    deepgram, Finnish: azure), as its calls are.
 * 5. `dev`, or a vendor without credentials: undefined, no request, one warning per vendor.
 * 6. nothing heard: undefined.
 * 7. vendor failures throw TranscriptionFailed with the HTTP status and never the key: a refused
 *    key (each vendor), a format the server refuses, a server that cannot be reached, one that
 *    does not answer within the time limit.
 */

const KEYS = { openai: 'sk-file-openai-secret', azure: 'azure-file-secret', deepgram: 'dg-file-secret', elevenlabs: 'el-unused' };
const PROVIDER = { deepgram: 11, openai: 12, azure: 13, dev: 14 };
const LANGUAGE = { english: 1, german: 2, finnish: 9 };
/** A voice note's bytes: an Ogg page header, then every byte value (a body mangled as text would show). */
const VOICE_NOTE = Buffer.concat([Buffer.from('OggS'), randomBytes(6_000)]);
const OPUS = 'audio/ogg; codecs=opus';
const silent = createLogger('silent');

const api = await startTestPlatform(t);
const owner = await api.user();

/** An assistant as the channels read it, created through the API. */
async function assistant(fields: Record<string, unknown>): Promise<AssistantWithTools> {
  const { id } = await api.assistant(owner.token, fields);
  return (await findAssistantWithTools(api.platform.runtime.pool, owner.id, id))!;
}

function transcriber(speech: SpeechVendors, logTo?: (line: Record<string, unknown>) => void, timeoutMs?: number) {
  const logger = logTo ? createLogger('info', { write: (line: string) => logTo(JSON.parse(line) as Record<string, unknown>) }) : silent;
  return createFileTranscriber({ speech, catalog: api.platform.runtime.services.catalog, logger, ...(timeoutMs ? { timeoutMs } : {}) });
}

/** An origin nothing listens on: a port just taken from the system and given back. */
async function deadOrigin(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

const openaiVendor = (baseUrl: string, apiKey = KEYS.openai, model = 'whisper-1') => ({ url: baseUrl, apiKey, model, mode: 'batch' as const, realtimeUrl: `${baseUrl.replace(/^http/, 'ws')}/realtime` });
const azureVendor = (origin: string, apiKey = KEYS.azure) => ({ endpoint: origin, apiKey, deployment: 'whisper-voice', apiVersion: '2024-06-01' });

t.test('openai: the file as it came, with model, language and json; the text comes back', async (t) => {
  const fake = await startFakeTranscriber(t, { openai: KEYS.openai }, { anyAudio: true });
  const english = await assistant({ transcriber_provider_id: PROVIDER.openai });
  const transcribe = transcriber({ openaiTranscribe: openaiVendor(fake.baseUrl) });
  fake.utterances.push('  Do you deliver on Sundays?  ');

  t.equal(await transcribe(english, { bytes: VOICE_NOTE, mimeType: OPUS }), 'Do you deliver on Sundays?');
  t.same(fake.refused, []);
  t.equal(fake.files.length, 1, 'one request');
  const [request] = fake.files;
  t.equal(request!.path, '/v1/audio/transcriptions');
  t.equal(request!.headers.authorization, `Bearer ${KEYS.openai}`);
  t.same(request!.fields, { model: 'whisper-1', language: 'en', response_format: 'json' });
  t.equal(request!.file.filename, 'voice-message.ogg', 'named after its type, which OpenAI reads the format from');
  t.equal(request!.file.contentType, OPUS, 'the content type as it came');
  t.ok(request!.file.bytes.equals(VOICE_NOTE), 'the bytes as they came');

  const mp4 = randomBytes(3_000);
  await transcribe(english, { bytes: mp4, mimeType: 'audio/mp4' });
  t.equal(fake.files[1]!.file.filename, 'voice-message.m4a');
  t.ok(fake.files[1]!.file.bytes.equals(mp4));

  const bilingual = await assistant({ transcriber_provider_id: PROVIDER.openai, language_id: LANGUAGE.german, secondary_language_ids: [LANGUAGE.english] });
  const gpt4o = transcriber({ openaiTranscribe: openaiVendor(fake.baseUrl, KEYS.openai, 'gpt-4o-mini-transcribe') });
  fake.utterances.push('Guten Tag');
  t.equal(await gpt4o(bilingual, { bytes: VOICE_NOTE, mimeType: OPUS }), 'Guten Tag');
  t.same(fake.files[2]!.fields, { model: 'gpt-4o-mini-transcribe', response_format: 'json' }, 'several languages: the server detects which');
});

t.test('azure: the deployment URL with api-version and api-key', async (t) => {
  const fake = await startFakeTranscriber(t, { azure: KEYS.azure }, { anyAudio: true });
  const finnish = await assistant({ transcriber_provider_id: PROVIDER.azure, language_id: LANGUAGE.finnish });
  const transcribe = transcriber({ azureTranscribe: azureVendor(fake.origin) });
  const mp3 = randomBytes(4_000);
  fake.utterances.push('Hyvää päivää');

  t.equal(await transcribe(finnish, { bytes: mp3, mimeType: 'audio/mpeg' }), 'Hyvää päivää');
  t.same(fake.refused, []);
  const [request] = fake.files;
  t.equal(request!.path, '/openai/deployments/whisper-voice/audio/transcriptions?api-version=2024-06-01');
  t.equal(request!.headers['api-key'], KEYS.azure);
  t.equal(request!.headers.authorization, undefined);
  t.same(request!.fields, { model: 'whisper-voice', language: 'fi', response_format: 'json' });
  t.match(request!.file, { filename: 'voice-message.mp3', contentType: 'audio/mpeg' });
  t.ok(request!.file.bytes.equals(mp3));
});

t.test('deepgram: the pre-recorded API with the file as the body', async (t) => {
  const fake = await startFakeSpeech(t, KEYS);
  const english = await assistant({ transcriber_provider_id: PROVIDER.deepgram });
  const transcribe = transcriber({ deepgram: { apiKey: KEYS.deepgram, url: fake.wsUrl } });
  fake.utterances.push('Where is my order?');

  t.equal(await transcribe(english, { bytes: VOICE_NOTE, mimeType: OPUS }), 'Where is my order?');
  t.equal(fake.deepgramFiles.length, 1);
  const [request] = fake.deepgramFiles;
  t.same(Object.fromEntries(request!.query), { model: 'nova-3', smart_format: 'true', language: 'en' });
  t.equal(request!.headers.authorization, `Token ${KEYS.deepgram}`);
  t.equal(request!.headers['content-type'], OPUS, 'the content type as it came');
  t.ok(request!.bytes.equals(VOICE_NOTE), 'the bytes as they came');
  t.same(fake.deepgramQueries, [], 'no live stream opened');

  const bilingual = await assistant({ transcriber_provider_id: PROVIDER.deepgram, secondary_language_ids: [LANGUAGE.german] });
  fake.utterances.push('Wo ist meine Bestellung?');
  t.equal(await transcribe(bilingual, { bytes: VOICE_NOTE, mimeType: 'audio/amr' }), 'Wo ist meine Bestellung?');
  t.equal(fake.deepgramFiles[1]!.query.get('language'), 'multi', 'several languages: Deepgram detects which, as in calls');
  t.equal(fake.deepgramFiles[1]!.headers['content-type'], 'audio/amr');
});

t.test("without a transcriber of its own, the language's default hears the assistant", async (t) => {
  const speech = await startFakeSpeech(t, KEYS);
  const azure = await startFakeTranscriber(t, { azure: KEYS.azure }, { anyAudio: true });
  const created = await assistant({});
  // Pipeline assistants are given their language's transcriber when created; other modes keep none.
  const english = { ...created, transcriber_provider_id: null };
  const finnish = { ...created, transcriber_provider_id: null, language_id: LANGUAGE.finnish };
  const transcribe = transcriber({ deepgram: { apiKey: KEYS.deepgram, url: speech.wsUrl }, azureTranscribe: azureVendor(azure.origin) });
  speech.utterances.push('English words');
  azure.utterances.push('Suomeksi');

  t.equal(await transcribe(english, { bytes: VOICE_NOTE, mimeType: OPUS }), 'English words');
  t.equal(await transcribe(finnish, { bytes: VOICE_NOTE, mimeType: OPUS }), 'Suomeksi');
  t.equal(speech.deepgramFiles.length, 1, 'English: deepgram');
  t.equal(azure.files.length, 1, 'Finnish: azure');
});

t.test('dev, or a vendor without credentials: nothing to transcribe with', async (t) => {
  const fake = await startFakeTranscriber(t, { openai: KEYS.openai }, { anyAudio: true });
  const dev = await assistant({ transcriber_provider_id: PROVIDER.dev });
  const openai = await assistant({ transcriber_provider_id: PROVIDER.openai });
  const lines: Array<Record<string, unknown>> = [];
  const transcribe = transcriber({ openaiTranscribe: openaiVendor(fake.baseUrl) }, (line) => lines.push(line));
  t.equal(await transcribe(dev, { bytes: VOICE_NOTE, mimeType: OPUS }), undefined, 'dev');
  t.equal(fake.files.length, 0, 'no request for dev');
  t.same(lines, [], 'dev is no misconfiguration');

  const unconfigured = transcriber({}, (line) => lines.push(line));
  t.equal(await unconfigured(openai, { bytes: VOICE_NOTE, mimeType: OPUS }), undefined, 'openai without credentials');
  t.equal(await unconfigured(openai, { bytes: VOICE_NOTE, mimeType: OPUS }), undefined);
  t.equal(fake.files.length, 0, 'no request without credentials');
  t.match(lines, [{ level: 40, provider: 'openai', msg: 'transcriber not configured; voice messages are not transcribed' }]);
  t.equal(lines.length, 1, 'warned once');
});

t.test('nothing heard: undefined', async (t) => {
  const fake = await startFakeSpeech(t, KEYS);
  const english = await assistant({ transcriber_provider_id: PROVIDER.deepgram });
  const transcribe = transcriber({ deepgram: { apiKey: KEYS.deepgram, url: fake.wsUrl } });
  fake.utterances.push('');
  t.equal(await transcribe(english, { bytes: VOICE_NOTE, mimeType: OPUS }), undefined);
  t.equal(fake.deepgramFiles.length, 1, 'it was asked');
});

t.test('vendor failures: thrown with the status, never the key', async (t) => {
  const openaiFake = await startFakeTranscriber(t, { openai: KEYS.openai, azure: KEYS.azure }, { anyAudio: true });
  const speech = await startFakeSpeech(t, KEYS);
  const byOpenai = await assistant({ transcriber_provider_id: PROVIDER.openai });
  const byAzure = await assistant({ transcriber_provider_id: PROVIDER.azure });
  const byDeepgram = await assistant({ transcriber_provider_id: PROVIDER.deepgram });
  const wrong = { openai: 'sk-wrong-openai-key', azure: 'wrong-azure-key', deepgram: 'wrong-deepgram-key' };
  const transcribe = transcriber({
    openaiTranscribe: openaiVendor(openaiFake.baseUrl, wrong.openai),
    azureTranscribe: azureVendor(openaiFake.origin, wrong.azure),
    deepgram: { apiKey: wrong.deepgram, url: speech.wsUrl },
  });
  const failure = async (promise: Promise<unknown>) => {
    const error = await promise.then(() => undefined, (e: unknown) => e);
    if (!(error instanceof TranscriptionFailed)) throw new Error(`expected a TranscriptionFailed, got ${String(error)}`);
    return error;
  };
  const note = { bytes: VOICE_NOTE, mimeType: OPUS };
  const secrets = [...Object.values(wrong), ...Object.values(KEYS)];
  const keyless = (error: Error) => secrets.every((key) => !error.message.includes(key) && !String(error.stack).includes(key));

  const openai = await failure(transcribe(byOpenai, note));
  t.match(openai, { vendor: 'openai', status: 401, code: 'invalid_api_key', retryable: false, message: /HTTP 401/ });
  t.ok(keyless(openai), openai.message);
  const azure = await failure(transcribe(byAzure, note));
  t.match(azure, { vendor: 'azure', status: 401, message: /HTTP 401/ });
  t.ok(keyless(azure), azure.message);
  const deepgram = await failure(transcribe(byDeepgram, note));
  t.match(deepgram, { vendor: 'deepgram', status: 401, code: 'INVALID_AUTH', message: /^the deepgram transcription request answered HTTP 401/ });
  t.ok(keyless(deepgram), deepgram.message);

  const right = transcriber({ openaiTranscribe: openaiVendor(openaiFake.baseUrl) });
  const amr = await failure(right(byOpenai, { bytes: VOICE_NOTE, mimeType: 'audio/amr' }));
  t.match(amr, { status: 400, message: /HTTP 400/ }, 'a format OpenAI does not read');
  t.match(openaiFake.refused, [/^Invalid file format/]);

  const gone = transcriber({ openaiTranscribe: openaiVendor(`${await deadOrigin()}/v1`) });
  const unreachable = await failure(gone(byOpenai, note));
  t.match(unreachable, { vendor: 'openai', code: 'unreachable', retryable: true, message: 'the openai transcription request failed (unreachable)' });
  t.equal(unreachable.status, undefined);

  openaiFake.stall = true;
  const impatient = transcriber({ openaiTranscribe: openaiVendor(openaiFake.baseUrl) }, undefined, 200);
  const slow = await failure(impatient(byOpenai, note));
  t.match(slow, { vendor: 'openai', code: 'timeout', retryable: true, message: 'the openai transcription request failed (timeout)' });
});
