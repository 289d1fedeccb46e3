import t from 'tap';
import { LONG_GREETING, callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * Turn-taking on a scripted timeline: barge-in clears the carrier's buffer within
 * `interrupt_sensitivity` + 150 ms of the caller's onset and cuts the transcript to what was heard;
 * a wordless "mm-hmm" pauses the agent, which resumes and says its greeting whole;
 * `min_interrupt_words`, backchannels and `allow_interruptions: false` keep the agent talking; `endpoint_type: ai` waits longer after unfinished words; the
 * end-of-turn silence counts from the caller's last loud frame.
 */

const greetingLine = (transcript: string) => /^assistant: (.*)$/m.exec(transcript)?.[1] ?? '';

t.test('barge-in: clear, the agent stops, the transcript keeps only what was heard', async (t) => {
  const s = await voiceSetup(t, { initial_message: LONG_GREETING });
  const { phone, callId } = await callIn(s, ['wait, stop please']);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  const onset = phone.elapsed;
  await phone.talk(800);
  t.equal(phone.heard.clears, 1, 'the carrier was told to clear its buffer');
  // The default interrupt_sensitivity is 0.5 s; the clear must come within 150 ms more.
  t.ok(phone.heard.clearsAt[0]! - onset <= 650, `cleared ${phone.heard.clearsAt[0]! - onset} ms after the caller began`);
  const afterClear = phone.heard.speechFrames;
  await phone.silence(100);
  t.ok(phone.heard.speechFrames - afterClear <= 5, 'the greeting stopped');
  await phone.until(() => phone.heard.speechFrames > afterClear + 10, 5_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  const heard = greetingLine(call.transcript);
  t.ok(heard.length > 0 && heard.length < LONG_GREETING.length, `cut greeting: "${heard}"`);
  t.ok(LONG_GREETING.startsWith(heard), 'a prefix of what was said');
  t.match(call.transcript, /\nuser: wait, stop please\nassistant: Thanks for your message\. You wrote: "wait, stop please"$/);
});

t.test('min_interrupt_words: fewer words pause the agent, which goes on and answers them after it finishes', async (t) => {
  const s = await voiceSetup(t, { initial_message: LONG_GREETING, min_interrupt_words: 3 });
  const { phone, callId } = await callIn(s, ['no']);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(800);
  await phone.untilAgentDone(400, 30_000);
  t.equal(phone.heard.clears, 1, 'one clear: the agent paused while the caller spoke, then went on');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.transcript, `assistant: ${LONG_GREETING}\nuser: no\nassistant: Thanks for your message. You wrote: "no"`);
});

t.test('a wordless "mm-hmm" over the greeting pauses it; the greeting resumes and is said whole', async (t) => {
  const s = await voiceSetup(t, { initial_message: LONG_GREETING });
  // Unscripted: the dev transcriber gives no words, so the utterance is judged by its length.
  const { phone, callId } = await callIn(s);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(600);
  t.equal(phone.heard.clears, 1, 'the agent paused (the carrier cleared its buffer)');
  const paused = phone.heard.speechFrames;
  await phone.until(() => phone.heard.speechFrames > paused + 25, 2_000, 'the greeting going on');
  t.ok(phone.elapsed - phone.heard.clearsAt[0]! <= 1_500, `resumed ${phone.elapsed - phone.heard.clearsAt[0]!} ms after the pause`);
  await phone.untilAgentDone(1_000);
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.transcript, `assistant: ${LONG_GREETING}`, 'said whole, and the "mm-hmm" is no turn');
  const metrics = String((await s.api.request('GET', '//metrics')).body);
  t.match(metrics, /call_interruptions_resumed_total\{mode="pipeline"\} 1/, 'counted as a false interruption resumed');
  t.notMatch(metrics, /call_interruptions_total\{mode="pipeline"\} [1-9]/, 'not as an interruption');
});

t.test('a backchannel does not interrupt and is not a turn', async (t) => {
  const s = await voiceSetup(t, { initial_message: LONG_GREETING });
  const { phone, callId } = await callIn(s, ['okay']);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(700);
  await phone.untilAgentDone(1_000);
  t.equal(phone.heard.clears, 0, 'no clear');
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.transcript, `assistant: ${LONG_GREETING}`);
});

t.test('allow_interruptions false: the agent finishes, then answers what was said over it', async (t) => {
  const s = await voiceSetup(t, { initial_message: LONG_GREETING, allow_interruptions: false });
  const { phone, callId } = await callIn(s, ['wait, stop please']);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(1_500);
  await phone.untilAgentDone(1_000);
  await phone.untilAgentDone(400);
  t.equal(phone.heard.clears, 0, 'no clear');
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.transcript, `assistant: ${LONG_GREETING}\nuser: wait, stop please\nassistant: Thanks for your message. You wrote: "wait, stop please"`);
});

t.test('endpoint_type ai waits longer after unfinished words', async (t) => {
  const s = await voiceSetup(t, { endpoint_type: 'ai', wait_for_customer: true });
  const gap = async (utterance: string) => {
    const { phone } = await callIn(s, [utterance]);
    await phone.talk(1_000);
    const start = phone.elapsed;
    phone.firstSpeechAt = undefined;
    await phone.until(() => phone.firstSpeechAt !== undefined, 8_000, 'the answer');
    phone.phone.hangUp();
    return phone.firstSpeechAt! - start;
  };
  const finished = await gap('My order number is A B C.');
  const unfinished = await gap('I would like to order and');
  t.ok(finished >= 460 && finished < 800, `finished sentence answered after ${finished} ms`);
  t.ok(unfinished >= 1_150, `unfinished sentence answered after ${unfinished} ms`);
});

t.test("the configured end-of-turn silence counts from the caller's last loud frame", async (t) => {
  const s = await voiceSetup(t, { wait_for_customer: true, endpoint_sensitivity: 0.5 });
  const { phone } = await callIn(s, ['Where is my parcel?']);
  await phone.talk(1_000);
  const start = phone.elapsed;
  phone.firstSpeechAt = undefined;
  await phone.until(() => phone.firstSpeechAt !== undefined, 3_000, 'the answer');
  phone.phone.hangUp();
  const gap = phone.firstSpeechAt! - start;
  // 500 ms of silence, then the instant dev providers: the VAD's 80 ms hangover over dips between words is not added.
  t.ok(gap >= 500 && gap <= 540, `answered ${gap} ms after the caller stopped`);
});

t.test('wait_for_customer: what the caller said first is kept for the model, and the greeting is in the history once', async (t) => {
  const { startFakeOpenAi } = await import('./fakes/openai.js');
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, { wait_for_customer: true, initial_message: 'Hello, this is Bot.' }, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } } } });
  fake.scriptChat({ text: 'Cancelled.' });
  const { phone, callId } = await callIn(s, ['I need to cancel order 4417.', 'Can you do that?']);
  await phone.turn();
  await phone.turn();
  phone.phone.hangUp();
  await endedCall(s, callId);
  const asked = fake.requests.find((r) => r.path.includes('chat'))!.body.messages;
  t.match(asked[0].content, /It is now Tuesday, 24 November 2026(,| at) 10:00 \(UTC\)\.$/, "the model knows the date and time in the assistant's time zone");
  const messages = asked.slice(1).map((m: { role: string; content: string }) => [m.role, m.content]);
  t.same(messages, [
    ['user', 'I need to cancel order 4417.'],
    ['assistant', 'Hello, this is Bot.'],
    ['user', 'Can you do that?'],
  ]);
});
