import t from 'tap';
import { callIn, voiceSetup } from './helpers/voice.js';

/**
 * VOICE_VAD=silero on a whole platform:
 * 1. Start-up loads the model in its worker and says which VAD is in use; a call's hearing gets
 *    the Silero VAD.
 * 2. The stop ends the worker: it keeps the process alive until then, so a stop that forgot it
 *    would leave this file running until tap's timeout.
 */

t.test('the platform runs calls on the Silero VAD and stops its worker', async (t) => {
  const lines: Array<Record<string, unknown>> = [];
  const s = await voiceSetup(t, {}, { config: { voiceVad: 'silero' }, logTo: (line) => lines.push(line) });
  t.ok(lines.some((l) => l.msg === 'voice activity detection' && l.vad === 'silero'), 'start-up names the Silero VAD');
  t.ok(lines.some((l) => l.msg === 'the VAD model is loaded'), 'with its model loaded');
  const { callId, phone } = await callIn(s);
  t.equal(s.api.platform.runtime.services.voice.session(callId)?.spec.vad?.name, 'silero', "the call's spec names it");
  await phone.silence(200);
});
