import t, { type Test } from 'tap';
import { SAY_EXACTLY } from '../runtime/voice/providers/types.js';
import { startFakeOpenAi } from './fakes/openai.js';
import { startFakeSpeech, type FakeSpeech, type Reply } from './fakes/speech.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * The vendor adapters against local fakes of their wire protocols: Deepgram live STT (kept alive
 * while idle) and
 * ElevenLabs streaming TTS in a pipeline call (voice settings reach the TTS request; a language
 * switch picks the voice of that language), OpenAI Realtime in multimodal (session.update,
 * greeting, turn, barge-in with truncate, function call; a stalled response cancelled for the
 * text model's answer, a slow one left to finish), OpenAI Realtime text with OpenAI TTS in dualplex.
 */

const keys = { deepgram: 'dg-key', elevenlabs: 'el-key', openai: 'sk-fake' };
const speechConfig = (fake: FakeSpeech) => ({
  speech: {
    deepgram: { apiKey: keys.deepgram, url: fake.wsUrl },
    elevenlabs: { apiKey: keys.elevenlabs, url: fake.httpUrl },
    openai: { apiKey: keys.openai, url: `${fake.httpUrl}/v1`, realtimeUrl: `${fake.wsUrl}/v1/realtime` },
  },
});

/** A multimodal call over the fake OpenAI Realtime, with a fake chat model as chat_llm_fallback_id. */
async function multimodalWithFallback(t: Test, extra: Record<string, unknown> = {}) {
  const fake = await startFakeSpeech(t, keys);
  const chat = await startFakeOpenAi(t);
  const s = await voiceSetup(
    t,
    { mode: 'multimodal', voice_id: 32, multimodal_model_id: 21, llm_model_id: null, chat_llm_fallback_id: 1, knowledgebase_mode: 'function_call', ...extra },
    { config: { ...speechConfig(fake), llmProviders: { openai: { baseUrl: chat.baseUrl, apiKey: 'sk-test' } } } },
  );
  return { fake, chat, s };
}

/**
 * The caller asks once; the realtime answer (`reply`) stalls past its 10 s, so the text model's
 * answer (`fallback`) is handed to the realtime voice. Returns the fake and the ended call.
 */
async function stalledTurn(t: Test, question: string, reply: Reply, fallback: string) {
  const { fake, chat, s } = await multimodalWithFallback(t);
  fake.utterances.push(question);
  fake.realtimeReplies.push(reply);
  chat.scriptChat({ text: fallback });
  const creates = () => fake.realtimeEvents.filter((e) => e.type === 'response.create');
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => creates().length >= 2, 5_000, 'the question asked of the realtime model');
  await phone.silence(10_100);
  await phone.until(() => creates().length >= 3, 5_000, "the text model's answer handed to the realtime voice");
  await phone.untilAgentDone();
  phone.phone.hangUp();
  return { fake, creates, call: await endedCall(s, callId) };
}

t.test('an idle Deepgram stream is kept alive, so it outlasts a long ring', async (t) => {
  const fake = await startFakeSpeech(t, keys);
  const config = speechConfig(fake);
  const s = await voiceSetup(t, {}, { config: { speech: { ...config.speech, deepgram: { ...config.speech.deepgram, keepAliveMs: 30 } } } });
  const { phone, callId } = await callIn(s);
  // No audio goes out while nobody steps the phone: real time passes with the stream idle (the
  // keep-alive is owed to the vendor in its time, not the call's).
  await fake.deepgramSent('KeepAlive');
  t.ok(fake.deepgramControl.includes('KeepAlive'), 'KeepAlive sent while no audio flowed');
  phone.phone.hangUp();
  t.match(await endedCall(s, callId), { status: 'ended_by_customer' });
});

t.test('frames a vendor was not expected to send fail at most that call, never the process', async (t) => {
  const fake = await startFakeSpeech(t, keys);
  // Once each of these ended the process from inside the socket's listener.
  const odd = ['null', '7', '"Results"', '[]', '{"type":"Results","channel":{"alternatives":[{"transcript":123,"languages":[7]}]}}', '{"type":"Results","channel":null}', '{"type":"Results","channel":{"alternatives":"x","detected_language":5}}'];
  const pipeline = await voiceSetup(t, {}, { config: speechConfig(fake) });
  const first = await callIn(pipeline);
  await first.phone.until(() => fake.streams.deepgram.length === 1, 3_000, 'the Deepgram stream');
  for (const frame of odd) fake.streams.deepgram[0]!.send(frame);
  await first.phone.untilAgentDone();
  await first.phone.talk(800);
  await first.phone.until(() => pipeline.api.platform.runtime.services.voice.session(first.callId)?.transcript.some((entry) => entry.role === 'user') === true, 5_000, 'a turn heard after the odd frames');
  first.phone.phone.hangUp();
  t.match(await endedCall(pipeline, first.callId), { status: 'ended_by_customer' }, 'the call went on as if they had not come');

  const multimodal = await voiceSetup(t, { mode: 'multimodal', voice_id: 32, multimodal_model_id: 21, llm_model_id: null, knowledgebase_mode: 'function_call' }, { config: speechConfig(fake) });
  const second = await callIn(multimodal);
  await second.phone.until(() => fake.streams.realtime.length === 1, 3_000, 'the realtime session');
  for (const frame of ['null', '3', '[1]', '{"type":"response.created","response":null}', '{"type":"error","error":null}']) fake.streams.realtime[0]!.send(frame);
  await second.phone.untilAgentDone();
  second.phone.phone.hangUp();
  t.match(await endedCall(multimodal, second.callId), { status: 'ended_by_customer' });
  t.equal((await fetch(`${multimodal.api.origin}/health`)).status, 200, 'the process is still serving');
});

t.test('pipeline with Deepgram and ElevenLabs: settings reach the TTS, a language switch changes the voice', async (t) => {
  const fake = await startFakeSpeech(t, keys);
  const s = await voiceSetup(t, { voice_stability: 0.3, voice_similarity: 0.9, speech_speed: 1.1, tts_emotion_enabled: false, secondary_language_ids: [2] }, { config: speechConfig(fake) });
  fake.utterances.push('Do you ship to Berlin?', '[de] Können Sie mir helfen?');
  const { phone, callId } = await callIn(s);
  await phone.until(() => phone.heard.speechFrames > 10, 3_000, 'the greeting');
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => fake.ttsRequests.length >= 2, 5_000, 'the answer');
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => fake.ttsRequests.some((r) => r.body.language_code === 'de'), 5_000, 'the German answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);

  t.equal(fake.deepgramQueries.length, 1, 'one Deepgram stream per call');
  t.equal(fake.deepgramQueries[0]!.get('encoding'), 'linear16');
  t.equal(fake.deepgramQueries[0]!.get('sample_rate'), '16000');
  t.equal(fake.deepgramQueries[0]!.get('language'), 'multi', 'language detection with a secondary language');
  t.ok(fake.deepgramControl.filter((c) => c === 'Finalize').length >= 2, 'each turn finalized');
  const [greeting, answer] = fake.ttsRequests;
  const german = fake.ttsRequests.find((r) => r.body.language_code === 'de');
  t.equal(greeting!.path, '/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM/stream?output_format=pcm_16000');
  t.same(greeting!.body, { text: 'Hello, this is Bot.', model_id: 'eleven_flash_v2_5', language_code: 'en', voice_settings: { stability: 0.3, similarity_boost: 0.9, style: 0, use_speaker_boost: true, speed: 1.1 } });
  t.equal(answer!.body.text, 'Thanks for your message.');
  t.equal(german!.path.split('/')[3], 'de-hannah-v2', 'the German voice of the same provider');
  t.equal(german!.body.language_code, 'de');
  t.match(call.transcript, /user: Do you ship to Berlin\?\nassistant: Thanks for your message\. You wrote: "Do you ship to Berlin\?"\nuser: Können Sie mir helfen\?/);
});

t.test('multimodal with OpenAI Realtime: session, greeting, turn, barge-in truncation, function call', async (t) => {
  const fake = await startFakeSpeech(t, keys);
  const s = await voiceSetup(
    t,
    { mode: 'multimodal', voice_id: 32, multimodal_model_id: 21, llm_model_id: null, knowledgebase_mode: 'function_call', turn_detection_threshold: 0.7, speech_speed: 1.1, initial_message: 'Hello and welcome to the example company support line, how can I help you today?', tools: [{ type: 'end_call' }] },
    { config: speechConfig(fake) },
  );
  fake.utterances.push('Stop, tell me the price.', 'Thanks, bye.');
  fake.realtimeReplies.push({ text: 'It costs ten dollars.' }, { functionCall: { name: 'end_call', arguments: {} } }, { text: 'Goodbye!' });
  const { phone, callId } = await callIn(s);
  await phone.until(() => phone.heard.speechFrames > 40, 3_000, 'most of a second of greeting');
  await phone.talk(800);
  t.equal(phone.heard.clears, 1, 'barge-in cleared the buffer');
  await phone.until(() => fake.realtimeEvents.filter((e) => e.type === 'response.create').length >= 2, 5_000, 'the answer');
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => phone.closed, 8_000, 'the end of the call');
  const call = await endedCall(s, callId);

  t.equal(fake.realtimeHeaders[0]!['openai-beta'], 'realtime=v1');
  const session = fake.realtimeEvents[0]!;
  t.equal(session.type, 'session.update');
  t.match(session.session, { voice: 'ash', speed: 1.1, modalities: ['audio', 'text'], input_audio_format: 'pcm16', turn_detection: { type: 'server_vad', threshold: 0.7, create_response: false, interrupt_response: false } });
  t.same(session.session.tools.map((tool: { name: string }) => tool.name), ['end_call']);
  const creates = fake.realtimeEvents.filter((e) => e.type === 'response.create');
  t.equal(creates[0]!.response.instructions, `${SAY_EXACTLY}"Hello and welcome to the example company support line, how can I help you today?"`);
  const truncate = fake.realtimeEvents.find((e) => e.type === 'conversation.item.truncate')!;
  t.match(truncate, { item_id: /^item_out_/, content_index: 0 });
  t.ok(truncate.audio_end_ms > 0 && truncate.audio_end_ms < 6_000, `truncated at ${truncate.audio_end_ms} ms`);
  t.ok(fake.realtimeEvents.some((e) => e.type === 'response.cancel'), 'the response was cancelled');
  const output = fake.realtimeEvents.find((e) => e.type === 'conversation.item.create' && e.item.type === 'function_call_output')!;
  t.match(JSON.parse(output.item.output), { ok: true });
  t.equal(call.status, 'ended_by_assistant');
  t.match(call.transcript, /^assistant: Hello and welcome[^\n]*\nuser: Stop, tell me the price\.\nassistant: It costs ten dollars\.\nuser: Thanks, bye\.\nassistant: Goodbye!$/);
  const greetingHeard = /^assistant: (.*)$/m.exec(call.transcript)![1]!;
  t.ok(greetingHeard.length < 80, `greeting cut to "${greetingHeard}"`);
});

t.test('dualplex with OpenAI Realtime (text) and OpenAI TTS; endpoint_type ai is its semantic end-of-turn detection', async (t) => {
  const fake = await startFakeSpeech(t, keys);
  const s = await voiceSetup(t, { mode: 'dualplex', voice_id: 16, multimodal_model_id: 21, llm_model_id: null, knowledgebase_mode: 'function_call', endpoint_type: 'ai', endpoint_sensitivity: 2 }, { config: speechConfig(fake) });
  fake.utterances.push('What is the weather?');
  fake.realtimeReplies.push({ text: 'It is sunny today.' });
  const { phone, callId } = await callIn(s);
  await phone.until(() => phone.heard.speechFrames > 10, 3_000, 'the greeting');
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => fake.ttsRequests.length >= 2, 5_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.match(fake.realtimeEvents[0]!.session, { modalities: ['text'] });
  t.same(fake.realtimeEvents[0]!.session.turn_detection, { type: 'semantic_vad', eagerness: 'low', create_response: false, interrupt_response: false }, 'a patient caller (2 s of silence asked): low eagerness');
  t.same(fake.ttsRequests.map((r) => [r.vendor, r.body.voice, r.body.input, r.body.response_format]), [
    ['openai', 'alloy', 'Hello, this is Bot.', 'pcm'],
    ['openai', 'alloy', 'It is sunny today.', 'pcm'],
  ]);
  t.equal(call.transcript, 'assistant: Hello, this is Bot.\nuser: What is the weather?\nassistant: It is sunny today.');
});

t.test('multimodal: when the realtime model fails a tool round, chat_llm_fallback_id takes it', async (t) => {
  const { fake, chat, s } = await multimodalWithFallback(t, { tools: [{ type: 'end_call' }] });
  fake.utterances.push('Please end the call.');
  fake.realtimeReplies.push({ fail: true }, { text: 'Goodbye!' });
  chat.scriptChat({ toolCalls: [{ name: 'end_call', arguments: {} }] });
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => phone.closed, 10_000, 'the end of the call');
  const call = await endedCall(s, callId);
  t.equal(call.status, 'ended_by_assistant');
  const asked = chat.requests.find((r) => r.path.includes('chat'))!.body;
  t.same(asked.tools.map((tool: { function: { name: string } }) => tool.function.name), ['end_call']);
  t.match(asked.messages.at(-1), { role: 'user', content: 'Please end the call.' });
  const told = fake.realtimeEvents.find((e) => e.type === 'conversation.item.create' && e.item.type === 'message' && e.item.role === 'user');
  t.match(told?.item.content[0].text, /^\[The end_call tool returned: \{"ok":true/);
  t.match(call.transcript, /user: Please end the call\.\nassistant: Goodbye!$/);
});

t.test('multimodal: a realtime response that stalls is cancelled and the text model answers; the late cancelled done is not taken for that answer', async (t) => {
  const { fake, creates, call } = await stalledTurn(t, 'Where is my order?', { hang: true }, 'Sorry for the wait, your order ships today.');
  t.ok(fake.realtimeEvents.some((e) => e.type === 'response.cancel'), 'the stalled response was cancelled');
  t.match(creates().at(-1)!.response.instructions, /Sorry for the wait, your order ships today\./);
  t.match(call.transcript, /user: Where is my order\?\nassistant: Sorry for the wait, your order ships today\.$/);
});

t.test('multimodal: a realtime response that keeps streaming is not cut when it runs past the stall timeout', async (t) => {
  const fake = await startFakeSpeech(t, keys);
  const s = await voiceSetup(t, { mode: 'multimodal', voice_id: 32, multimodal_model_id: 21, llm_model_id: null, knowledgebase_mode: 'function_call' }, { config: speechConfig(fake) });
  const gates = [0, 1].map(() => {
    let resolve!: () => void;
    const promise = new Promise<void>((done) => (resolve = done));
    return { promise, resolve };
  });
  fake.utterances.push('Tell me a story.');
  fake.realtimeReplies.push({ text: 'This answer takes a while to arrive.', gates: gates.map((gate) => gate.promise) });
  const { phone, callId } = await callIn(s);
  await phone.untilAgentDone();
  await phone.talk(800);
  await phone.until(() => fake.realtimeEvents.filter((e) => e.type === 'response.create').length >= 2, 5_000, 'the question');
  // 6 s, more audio, 6 s more: twelve seconds since the question, never ten without progress.
  await phone.silence(6_000);
  const heard = phone.heard.speechFrames;
  gates[0]!.resolve();
  await phone.until(() => phone.heard.speechFrames > heard, 2_000, 'the second chunk of audio');
  await phone.silence(6_000);
  gates[1]!.resolve();
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.notOk(fake.realtimeEvents.some((e) => e.type === 'response.cancel'), 'the response was never cancelled');
  t.match(call.transcript, /user: Tell me a story\.\nassistant: This answer takes a while to arrive\.$/);
});

t.test('multimodal: a stalled response that starts late is not taken for the answer asked after it', async (t) => {
  const { fake, call } = await stalledTurn(t, 'Is the shop open?', { text: 'A stale answer.', late: true }, 'Yes, until six.');
  t.match(call.transcript, /user: Is the shop open\?\nassistant: Yes, until six\.$/);
  t.ok(fake.realtimeEvents.filter((e) => e.type === 'response.cancel').length >= 2, 'the late start was cancelled too');
});
