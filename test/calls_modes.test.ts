import t from 'tap';
import { LONG_GREETING, callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * The realtime engine modes with the dev realtime model: `multimodal` (the model speaks) and
 * `dualplex` (the model writes, the assistant's voice speaks): greeting, a turn, a function call
 * (end_call), barge-in in multimodal, and a wordless "mm-hmm" over the multimodal greeting that
 * pauses it and is resumed from (the model's transcript of it takes no turn).
 */

const multimodal = { mode: 'multimodal', voice_id: 31, multimodal_model_id: 24, llm_model_id: null, knowledgebase_mode: 'function_call' };
const dualplex = { mode: 'dualplex', voice_id: 1, multimodal_model_id: 24, llm_model_id: null, knowledgebase_mode: 'function_call' };

for (const [name, fields] of [['multimodal', multimodal], ['dualplex', dualplex]] as const) {
  t.test(`${name}: greeting, a turn answered, end_call through the realtime model's function call`, async (t) => {
    const s = await voiceSetup(t, { ...fields, tools: [{ type: 'end_call' }] });
    const { phone, callId } = await callIn(s, ['What do you sell?', 'Thanks, end call please.']);
    await phone.until(() => phone.heard.speechFrames > 10, 2_000, 'the greeting');
    await phone.untilAgentDone();
    const greeting = phone.heard.speechFrames;
    await phone.talk(800);
    await phone.until(() => phone.heard.speechFrames > greeting + 10, 5_000, 'the answer');
    await phone.untilAgentDone();
    await phone.talk(800);
    await phone.until(() => phone.closed, 10_000, 'the end of the call');
    const call = await endedCall(s, callId);
    t.equal(call.status, 'ended_by_assistant');
    t.match(call.transcript, /^assistant: Hello, this is Bot\.\nuser: What do you sell\?\nassistant: Thanks for your message\. You wrote: "What do you sell\?"\nuser: Thanks, end call please\.\nassistant: Thank you for calling\. Goodbye\.$/, 'the goodbye end_call asked for');
  });
}

t.test('multimodal: a wordless "mm-hmm" over the greeting pauses it; the greeting resumes and is said whole', async (t) => {
  const s = await voiceSetup(t, { ...multimodal, initial_message: LONG_GREETING });
  const { phone, callId } = await callIn(s);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(600);
  t.equal(phone.heard.clears, 1, 'the agent paused');
  const paused = phone.heard.speechFrames;
  await phone.until(() => phone.heard.speechFrames > paused + 25, 4_000, 'the greeting going on');
  await phone.untilAgentDone(1_000);
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  t.equal(call.transcript, `assistant: ${LONG_GREETING}`, 'said whole, and the "mm-hmm" is no turn');
});

t.test('multimodal barge-in: the audio is cleared and the transcript cut', async (t) => {
  const s = await voiceSetup(t, { ...multimodal, initial_message: LONG_GREETING });
  const { phone, callId } = await callIn(s, ['Stop, I have a question.']);
  await phone.until(() => phone.heard.speechFrames > 50, 3_000, 'a second of greeting');
  await phone.talk(800);
  t.equal(phone.heard.clears, 1);
  await phone.until(() => phone.heard.speechFrames > 100, 5_000, 'the answer');
  await phone.untilAgentDone();
  phone.phone.hangUp();
  const call = await endedCall(s, callId);
  const heard = /^assistant: (.*)$/m.exec(call.transcript)![1]!;
  t.ok(heard.length < LONG_GREETING.length && LONG_GREETING.startsWith(heard), `cut greeting "${heard}"`);
  t.match(call.transcript, /\nuser: Stop, I have a question\.\nassistant: Thanks for your message/);
});
