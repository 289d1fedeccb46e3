import t, { type Test } from 'tap';
import type { SpeechVendors } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';
import { speechFrame } from './helpers/phone.js';
import { createOpenAiRealtimeStt } from '../runtime/voice/providers/openaiRealtimeStt.js';
import { createBatchStt } from '../runtime/voice/providers/openaiTranscribe.js';
import type { Transcript } from '../runtime/voice/providers/types.js';
import { startFakeTranscriber, type FakeTranscriber } from './fakes/transcribe.js';
import { LONG_GREETING, callIn, endedCall, voiceSetup } from './helpers/voice.js';
import { Conditions } from './helpers/conditions.js';

/**
 * The `openai` and `azure` transcribers against a local OpenAI-compatible transcription server
 * (Twilio calls, pipeline mode):
 * 1. batch: the caller's utterance goes out once, as a 16 kHz mono WAV from just before its onset
 *    to just after its end (not the end-of-turn silence), with model, language and
 *    `response_format=json`; the assistant answers the words.
 * 2. batch with a wrong key: each failure is logged (status and code, never the key) and the call
 *    goes on to its normal end.
 * 3. batch: "mm-hmm" said over the greeting pauses it; the words, once in, resume it (a false
 *    interruption); "wait, stop please" makes the interruption stand.
 * 4. azure: an Azure OpenAI deployment's URL with `api-version` and `api-key`.
 * 5. not configured: the `dev` transcriber serves, with the warning.
 * 5a. the batch adapter alone: with secondary languages a Whisper model is asked for
 *    `verbose_json` and no language, and the language it heard reaches hearing (a gpt-4o model
 *    gets `json`); speech longer than 30 s goes in pieces, the first piece's words an interim
 *    transcript; a server that hangs gives an empty final after the request's time limit.
 * 6. realtime: a transcription session (model, pcm16, no server turn detection, language); interim
 *    transcripts word by word, then the final, reach the call's hearing; the call answers the words;
 *    words over the greeting make the interruption stand; a refused key fails the call (as a
 *    Deepgram stream that cannot open does), logged, and the process serves on.
 */

const KEY = 'sk-transcribe-right';
const openaiTranscribe = (fake: FakeTranscriber, over: Partial<NonNullable<SpeechVendors['openaiTranscribe']>> = {}) => ({
  speech: { openaiTranscribe: { url: fake.baseUrl, apiKey: KEY, model: 'whisper-1', mode: 'batch' as const, realtimeUrl: fake.realtimeUrl, ...over } },
});
const TRANSCRIBER = { openai: 12, azure: 13 };
const greetingLine = (transcript: string) => /^assistant: (.*)$/m.exec(transcript)?.[1] ?? '';

t.test('batch: one request per utterance, a WAV of the utterance; the assistant answers its words', async (t) => {
  const fake = await startFakeTranscriber(t, { openai: KEY });
  const s = await voiceSetup(t, { transcriber_provider_id: TRANSCRIBER.openai }, { config: openaiTranscribe(fake) });
  fake.utterances.push('Do you ship to Berlin?');
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  await phone.turn(800);
  phone.phone.hangUp();
  const call = await endedCall(s, callId);

  t.same(fake.refused, [], 'every request well formed');
  t.equal(fake.requests.length, 1, 'one request for the one utterance (none for the silence of the greeting)');
  const [request] = fake.requests;
  t.equal(request!.path, '/v1/audio/transcriptions');
  t.equal(request!.headers.authorization, `Bearer ${KEY}`);
  t.match(request!.headers['content-type'], /^multipart\/form-data; boundary=/);
  t.same(request!.fields, { model: 'whisper-1', language: 'en', response_format: 'json' });
  t.match(request!.file, { filename: 'utterance.wav', contentType: 'audio/wav', wav: { sampleRate: 16_000, channels: 1, bitsPerSample: 16 } });
  const { durationMs, loudMs } = request!.file.wav;
  t.ok(loudMs >= 740 && loudMs <= 820, `the 800 ms of speech are in it (${loudMs} ms loud)`);
  // 300 ms of pre-roll at most before the onset, 200 ms after the VAD's last speech frame: not the 500 ms end-of-turn silence.
  t.ok(durationMs >= 900 && durationMs <= 1_400, `the utterance with a little before and after it: ${durationMs} ms`);
  t.match(call.transcript, /\nuser: Do you ship to Berlin\?\nassistant: Thanks for your message\. You wrote: "Do you ship to Berlin\?"$/);
  t.equal(call.status, 'ended_by_customer');
});

t.test('batch with a wrong key: the failure is logged, the call goes on', async (t) => {
  const fake = await startFakeTranscriber(t, { openai: KEY });
  const lines: Array<Record<string, any>> = [];
  const raw: string[] = [];
  const logged = new Conditions();
  const failures = () => lines.filter((line) => line.msg === 'transcription request failed; the utterance has no words');
  const s = await voiceSetup(t, { transcriber_provider_id: TRANSCRIBER.openai }, {
    config: openaiTranscribe(fake, { apiKey: 'sk-wrong-key' }),
    logTo: (line, text) => {
      lines.push(line);
      raw.push(text);
      logged.changed();
    },
  });
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => failures().length === 1, 5_000, 'the failure logged');
  await phone.talk(800);
  await phone.until(() => failures().length === 2, 5_000, 'the second failure logged');
  t.notOk(phone.closed, 'the call is still up');
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_customer', 'ended by the caller, not failed');
  t.equal(call.transcript, 'assistant: Hello, this is Bot.', 'nothing the caller said became words');
  t.match(failures()[0], { level: 40, callId, provider: 'openai', status: 401, code: 'invalid_api_key' });
  t.notOk(raw.some((line) => line.includes('sk-wrong') || line.includes('sk-wr***')), 'neither the key nor the vendor message quoting it is logged');
});

t.test('batch: a transcribed "mm-hmm" over the greeting resumes it; "wait, stop please" interrupts it', async (t) => {
  const fake = await startFakeTranscriber(t, { openai: KEY });
  const s = await voiceSetup(t, { transcriber_provider_id: TRANSCRIBER.openai, initial_message: LONG_GREETING }, { config: openaiTranscribe(fake) });

  fake.utterances.push('Mm-hmm.');
  const first = await callIn(s);
  await first.phone.until(() => first.phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await first.phone.talk(600);
  t.equal(first.phone.heard.clears, 1, 'the agent paused (the carrier cleared its buffer)');
  const paused = first.phone.heard.speechFrames;
  await first.phone.until(() => first.phone.heard.speechFrames > paused + 25, 8_000, 'the greeting going on');
  t.equal(fake.requests.length, 1, 'the words came from the transcriber');
  await first.phone.untilAgentDone(1_000);
  first.phone.phone.hangUp();
  t.equal((await endedCall(s, first.callId)).transcript, `assistant: ${LONG_GREETING}`, 'said whole, and the "mm-hmm" is no turn');
  const metrics = String((await s.api.request('GET', '//metrics')).body);
  t.match(metrics, /call_interruptions_resumed_total\{mode="pipeline"\} 1/, 'counted as a false interruption resumed');

  fake.utterances.push('Wait, stop please.');
  const second = await callIn(s);
  await second.phone.until(() => second.phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await second.phone.talk(800);
  const cleared = second.phone.heard.speechFrames;
  await second.phone.until(() => second.phone.heard.speechFrames > cleared + 10, 8_000, 'the answer');
  await second.phone.untilAgentDone();
  second.phone.phone.hangUp();
  const call = await endedCall(s, second.callId);
  const heard = greetingLine(call.transcript);
  t.ok(heard.length > 0 && heard.length < LONG_GREETING.length, `the greeting cut where it was heard: "${heard}"`);
  t.match(call.transcript, /\nuser: Wait, stop please\.\nassistant: Thanks for your message\. You wrote: "Wait, stop please\."$/);
});

t.test('azure: the deployment URL with api-version, the api-key header', async (t) => {
  const fake = await startFakeTranscriber(t, { azure: 'azure-key' });
  const s = await voiceSetup(t, { transcriber_provider_id: TRANSCRIBER.azure }, {
    config: { speech: { azureTranscribe: { endpoint: fake.origin, apiKey: 'azure-key', deployment: 'whisper', apiVersion: '2024-06-01' } } },
  });
  fake.utterances.push('Is the shop open today?');
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  await phone.turn(800);
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(fake.requests.length, 1);
  t.equal(fake.requests[0]!.path, '/openai/deployments/whisper/audio/transcriptions?api-version=2024-06-01');
  t.equal(fake.requests[0]!.headers['api-key'], 'azure-key');
  t.equal(fake.requests[0]!.headers.authorization, undefined);
  t.match(call.transcript, /\nuser: Is the shop open today\?\n/);
});

t.test('not configured: the dev transcriber serves the openai transcriber, and says so', async (t) => {
  const lines: Array<Record<string, any>> = [];
  const s = await voiceSetup(t, { transcriber_provider_id: TRANSCRIBER.openai }, { logTo: (line) => lines.push(line) });
  const { phone, callId } = await callIn(s, ['Hello there.']);
  await phone.untilAgentDone();
  await phone.turn(800);
  phone.phone.hangUp();
  t.match((await endedCall(s, callId)).transcript, /\nuser: Hello there\.\n/);
  t.match(lines.find((line) => line.msg === 'speech provider not configured; the dev provider serves it'), { kind: 'transcriber', provider: 'openai' });
});

/** The batch adapter on the fake, opened for `languages`; its transcripts collected. */
async function batchStream(t: Test, model: string, languages: string[], timeoutMs?: number) {
  const fake = await startFakeTranscriber(t, { openai: KEY });
  const got: Transcript[] = [];
  const arrived = new Conditions();
  const stt = createBatchStt({ name: 'openai', endpoint: `${fake.baseUrl}/audio/transcriptions`, headers: { authorization: `Bearer ${KEY}` }, model, ...(timeoutMs ? { timeoutMs } : {}) }, createLogger('silent'));
  const stream = stt.open({
    callId: 1,
    languages,
    onTranscript: (transcript) => {
      got.push(transcript);
      arrived.changed();
    },
    onError: (error) => t.fail(error.message),
  });
  t.teardown(() => stream.close());
  const speak = (frames: number) => {
    for (let i = 0; i < frames; i++) stream.write(speechFrame(i), true);
    for (let i = 0; i < 25; i++) stream.write(new Int16Array(320), false);
  };
  return { fake, got, stream, speak, final: () => arrived.until(() => got.some((g) => g.final)), interim: () => arrived.until(() => got.some((g) => !g.final)) };
}

t.test('batch alone: languages, long speech in pieces, a server that hangs', async (t) => {
  const whisper = await batchStream(t, 'whisper-1', ['de', 'en']);
  whisper.fake.utterances.push('Do you speak English?');
  whisper.speak(40);
  whisper.stream.finalize();
  await whisper.final();
  t.same(whisper.fake.requests[0]!.fields, { model: 'whisper-1', response_format: 'verbose_json' }, 'no language: the server detects it');
  t.same(whisper.got, [{ text: 'Do you speak English?', final: true, language: 'en' }], "OpenAI's language name as the call's code");

  const gpt = await batchStream(t, 'gpt-4o-mini-transcribe', ['de', 'en']);
  gpt.speak(40);
  gpt.stream.finalize();
  await gpt.final();
  t.same(gpt.fake.requests[0]!.fields, { model: 'gpt-4o-mini-transcribe', response_format: 'json' }, 'gpt-4o models answer json only');

  const long = await batchStream(t, 'whisper-1', ['en']);
  long.fake.utterances.push('First half,', 'second half.');
  long.speak(1_500 + 100);
  await long.interim();
  t.same(long.got, [{ text: 'First half,', final: false }], '30 s of speech: the first piece sent, its words an interim transcript');
  long.stream.finalize();
  await long.final();
  t.same(long.got.at(-1), { text: 'First half, second half.', final: true }, 'one final for the whole utterance');
  t.ok(long.fake.requests[0]!.file.wav.durationMs <= 30_000, 'no piece longer than 30 s');

  const hung = await batchStream(t, 'whisper-1', ['en'], 300);
  hung.fake.stall = true;
  hung.speak(40);
  hung.stream.finalize();
  await hung.final();
  t.same(hung.got, [{ text: '', final: true }], 'given up after its time limit: the utterance has no words');
});

t.test('realtime: interim transcripts word by word, then the final, from a transcription session', async (t) => {
  const fake = await startFakeTranscriber(t, { openai: KEY });
  fake.utterances.push('Where is my parcel?');
  const got: Transcript[] = [];
  const arrived = new Conditions();
  const stt = createOpenAiRealtimeStt({ realtimeUrl: fake.realtimeUrl, apiKey: KEY, model: 'gpt-4o-transcribe' }, createLogger('silent'));
  const stream = stt.open({
    callId: 1,
    languages: ['en'],
    onTranscript: (transcript) => {
      got.push(transcript);
      arrived.changed();
    },
    onError: (error) => t.fail(error.message),
  });
  t.teardown(() => stream.close());
  for (let i = 0; i < 10; i++) stream.write(new Int16Array(320), false);
  for (let i = 0; i < 40; i++) stream.write(speechFrame(i), true);
  for (let i = 0; i < 5; i++) stream.write(new Int16Array(320), false);
  await arrived.until(() => got.some((g) => g.text === 'Where is my parcel?'));
  t.same(got.map((g) => [g.text, g.final]), [['Where', false], ['Where is', false], ['Where is my', false], ['Where is my parcel?', false]], 'interim transcripts while the turn goes on (the pause committed what came before it)');
  stream.finalize();
  await arrived.until(() => got.some((g) => g.final));
  t.same(got.at(-1), { text: 'Where is my parcel?', final: true }, 'the end of the turn settles it');
  t.equal(stt.finalWaitMs, 3_000);
  await fake.realtimeSent('input_audio_buffer.clear');
  t.match(fake.realtimeHeaders[0], { authorization: `Bearer ${KEY}`, 'openai-beta': 'realtime=v1' });
  t.same(fake.realtimeEvents[0], { type: 'transcription_session.update', session: { input_audio_format: 'pcm16', input_audio_transcription: { model: 'gpt-4o-transcribe', language: 'en' }, turn_detection: null } });
  t.same(fake.realtimeEvents.slice(1).map((e) => e.type), ['input_audio_buffer.commit', 'input_audio_buffer.clear'], 'one commit at the pause; the silence after it cleared, not committed');
  // The pre-roll (300 ms) and the speech, then the frames up to the end of the turn: 55 frames at most, resampled to 24 kHz.
  t.ok(fake.appendedMs >= 40 * 20 && fake.appendedMs <= 55 * 20, `appended ${fake.appendedMs} ms`);
});

t.test('realtime: a call answers the words of a realtime transcription', async (t) => {
  const fake = await startFakeTranscriber(t, { openai: KEY });
  const s = await voiceSetup(t, { transcriber_provider_id: TRANSCRIBER.openai }, { config: openaiTranscribe(fake, { model: 'gpt-4o-mini-transcribe', mode: 'realtime' }) });
  fake.utterances.push('What are your opening hours?');
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  await phone.turn(800);
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(fake.realtimeHeaders.length, 1, 'one session per call');
  t.match(call.transcript, /\nuser: What are your opening hours\?\nassistant: Thanks for your message\. You wrote: "What are your opening hours\?"$/);
});

t.test('realtime: words over the greeting interrupt it; a refused key fails the call, logged', async (t) => {
  const fake = await startFakeTranscriber(t, { openai: KEY });
  const s = await voiceSetup(t, { transcriber_provider_id: TRANSCRIBER.openai, initial_message: LONG_GREETING }, { config: openaiTranscribe(fake, { model: 'gpt-4o-transcribe', mode: 'realtime' }) });
  fake.utterances.push('Wait, stop please.');
  const { phone, callId } = await callIn(s);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(800);
  const cleared = phone.heard.speechFrames;
  await phone.until(() => phone.heard.speechFrames > cleared + 10, 8_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  const heard = greetingLine(call.transcript);
  t.ok(heard.length > 0 && heard.length < LONG_GREETING.length, `the greeting cut where it was heard: "${heard}"`);
  t.match(call.transcript, /\nuser: Wait, stop please\.\nassistant: Thanks for your message\. You wrote: "Wait, stop please\."$/);
  const metrics = String((await s.api.request('GET', '//metrics')).body);
  t.match(metrics, /call_interruptions_total\{mode="pipeline"\} 1/, 'an interruption that stood');

  const lines: Array<Record<string, any>> = [];
  const refused = await voiceSetup(t, { transcriber_provider_id: TRANSCRIBER.openai }, { config: openaiTranscribe(fake, { apiKey: 'sk-wrong-key', mode: 'realtime' }), logTo: (line) => lines.push(line) });
  const second = await callIn(refused);
  await second.phone.until(() => second.phone.closed, 5_000, 'the end of the call');
  t.match(await endedCall(refused, second.callId), { status: 'failed' });
  t.match(lines.find((line) => line.msg === 'transcriber failed'), { err: { message: /401/ } });
  t.equal((await fetch(`${refused.api.origin}/health`)).status, 200, 'the process is still serving');
});
