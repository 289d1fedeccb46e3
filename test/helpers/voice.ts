import type { Test } from 'tap';
import { ManualClock } from '../../runtime/clock.js';
import type { RuntimeOptions } from '../../runtime/platform.js';
import type { Config } from '../../runtime/config.js';
import { SimulatedPhone } from './phone.js';
import { startTestPlatform, type TestPlatform } from './platform.js';

/** A platform on a manual clock with scripted transcripts, a funded user, a number and an assistant. */
export interface VoiceSetup {
  readonly api: TestPlatform;
  readonly clock: ManualClock;
  /** Transcripts per call id, one per utterance in order. */
  readonly scripts: Map<number, string[]>;
  readonly token: string;
  readonly userId: number;
  readonly number: string;
  readonly numberId: number;
  readonly assistantId: number;
  readonly assistantUuid: string;
}

export async function voiceSetup(
  t: Test,
  assistant: Record<string, unknown> = {},
  options: { config?: Partial<Config>; runtime?: RuntimeOptions; logTo?: (line: Record<string, unknown>, raw: string) => void } = {},
): Promise<VoiceSetup> {
  const clock = new ManualClock(Date.UTC(2026, 10, 24, 10, 0, 0));
  const scripts = new Map<number, string[]>();
  // Twilio's webhooks unsigned, as `callIn` posts them: tests of signatures set TWILIO_AUTH_TOKEN.
  const api = await startTestPlatform(t, { acceptUnsignedCarrierWebhooks: true, ...options.config }, { clock, speech: { transcripts: (callId, n) => scripts.get(callId)?.[n - 1] }, ...options.runtime }, options.logTo);
  const user = await api.user();
  await api.credit(user.id, 100);
  const number = await api.phoneNumber(user.token);
  const created = await api.assistant(user.token, { type: 'inbound', phone_number_id: number.id, initial_message: 'Hello, this is Bot.', ...assistant });
  return { api, clock, scripts, token: user.token, userId: user.id, number: number.number, numberId: number.id, assistantId: created.id, assistantUuid: created.uuid };
}

let sids = 0;

/** Twilio's voice webhook for a call to the setup's number, then the media stream of that call. */
export async function callIn(s: VoiceSetup, script: string[] = [], from = '+14155550199'): Promise<{ callId: number; phone: SimulatedPhone; token: string }> {
  const callSid = `CA${(++sids).toString(16).padStart(32, '0')}`;
  const form = new URLSearchParams({ To: s.number, From: from, CallSid: callSid });
  const answer = await s.api.request('POST', '/telephony/twilio/inbound', { raw: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const twiml = String(answer.body);
  const url = /<Stream url="([^"]+)"/.exec(twiml)?.[1];
  const callId = /name="call_id" value="(\d+)"/.exec(twiml)?.[1];
  const token = /name="token" value="([^"]+)"/.exec(twiml)?.[1];
  if (!url || !callId || !token) throw new Error(`unexpected TwiML: ${twiml}`);
  s.scripts.set(Number(callId), script);
  const phone = await SimulatedPhone.dial(url, callSid, { call_id: callId, token }, s.clock);
  phone.busy = agentBusy(s, Number(callId));
  return { callId: Number(callId), phone, token };
}

/** Whether the call's agent is preparing an answer, before its first audio (for `SimulatedPhone.busy`). */
export function agentBusy(s: VoiceSetup, callId: number): () => boolean {
  return () => s.api.platform.runtime.services.voice.session(callId)?.agentState === 'thinking';
}

/** The call as the API shows it, once its end is saved. */
export async function endedCall(s: VoiceSetup, callId: number): Promise<Record<string, any>> {
  await s.api.platform.runtime.services.voice.whenEnded(callId);
  const read = await s.api.request('GET', `/user/calls/${callId}`, { token: s.token });
  return read.body.data;
}

export const LONG_GREETING = 'Hello and welcome to the Example Company support line, where we help with orders, deliveries, returns, invoices and everything else you might need today, so please tell me how I can help.';
