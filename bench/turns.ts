import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startPlatform, type RunningPlatform } from '../api/platform.js';
import { Hearing } from '../runtime/voice/hearing/hearing.js';
import { ManualClock } from '../runtime/clock.js';
import { loadConfig, type Config } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';
import { loadCorpus, type Clip } from './corpus/build.js';
import { CorpusCaller, clipFrames, lockstep, overAgentScript, pauseScript, type OverAgentOutcome, type PauseOutcome, type Script } from './corpus/caller.js';
import { PAUSES_MS, corpusPlan, type ClipSpec } from './corpus/plan.js';
import { missingCorpusTools } from './corpus/tools.js';

/**
 * Turn-taking on the speech corpus (corpus/plan.ts): the platform in this process on a manual
 * clock, callers playing the clips over the Twilio media-stream protocol in lock step (simulated
 * time: faster than real time, the same figures on a slow machine), against assistants with default
 * settings on the dev model, voice and transcriber (which reports no words, so every decision is
 * the hearing's own). Per VAD (`VOICE_VAD`, a comma-separated list, each run on its own platform):
 * - false cut-offs per pause length, `endpoint_type` `vad` and `ai`: the agent answered (its audio
 *   began) before the caller's last word of a sentence with a mid-sentence pause; clean lines per
 *   pause length, lines with a TV or music (which plays on for 2.5 s after the caller) apart;
 * - how long after the caller's last word the agent answered (p50), where it did not cut off;
 * - false interruptions on backchannels and on noise said 1 s into the agent's greeting: the
 *   server sent `clear` (the agent paused) and it stood; resumed: after that clear the agent was
 *   audible again and the call's transcript holds the whole greeting (paused, then went on);
 * - barge-in: from a real interruption's first sound (the label's) to the server's `clear`, p50 and
 *   p95, and interruptions never cleared;
 * - CPU per call: the process's CPU (platform and simulated callers together) over the calls'
 *   simulated seconds, as % of a core a call would use in real time; and hearing's own share:
 *   the time in `Hearing.hear` (denoise, VAD, transcriber feed, end of turn, barge-in) plus the
 *   Silero worker's inference time, over the same seconds.
 * Usage: `npm run bench:turns [-- concurrency every]` (8 calls in lock step, every clip).
 * The corpus is built on the first run (espeak-ng and sox) and kept under DATA_DIR or the system's
 * temporary directory.
 */

/** Greeting of the assistant that is talked over: long enough to outlast any clip. */
export const LONG_GREETING = 'Hello and welcome to the Example Company support line, where we help with orders, deliveries, returns, invoices and everything else you might need today, so please tell me how I can help.';
/** The catalog's dev model, voice and transcriber: no network, no words heard. */
export const DEV_ASSISTANT = { voice_id: 30, llm_model_id: 6, transcriber_provider_id: 14, synthesizer_provider_id: 4, mode: 'pipeline', system_prompt: 'Help', timezone: 'UTC' } as const;
const LANGUAGE_IDS: Record<string, number> = { en: 1, de: 2, fr: 3 };
/** A barge-in cleared later than the interruption setting plus this is late. */
export const BARGE_IN_SLACK_MS = 150;

export type Role = 'listen-vad' | 'listen-ai' | 'talk';

export interface TurnsResult {
  readonly vad: string;
  /** Clean lines, per `endpoint_type`, per pause length: clips and false cut-offs. */
  readonly pauses: Record<'vad' | 'ai', Record<number, { clips: number; cutOffs: number }>>;
  /** Lines with a background (TV, music), every pause length, per `endpoint_type`. */
  readonly noisyPauses: Record<'vad' | 'ai', { clips: number; cutOffs: number }>;
  /** Where the agent did not cut off: from the caller's last word to its answer, clean and noisy lines. */
  readonly answerAfterP50Ms: Record<'vad' | 'ai', number>;
  readonly noisyAnswerAfterP50Ms: Record<'vad' | 'ai', number>;
  /** Over the agent: `paused` (cleared at all), `resumed` (it went on) and `interrupted` (the clear stood: a false interruption). */
  readonly backchannels: { clips: number; paused: number; resumed: number; interrupted: number };
  readonly noise: { clips: number; paused: number; resumed: number; interrupted: number };
  /**
   * Real interruptions: `early` were cleared before the caller spoke (by the line's background, a
   * false interruption of its own); latencies are of the others; `late` is never cleared or cleared
   * after `interrupt_sensitivity` + 150 ms.
   */
  /** `resumed`: the agent paused for a real interruption and then went on over it (the interruption lost). */
  readonly bargeIn: { clips: number; missed: number; early: number; p50Ms: number; p95Ms: number; late: number; resumed: number };
  /** Clips said over the agent that found it silent (not counted above). */
  readonly notOverAgent: number;
  readonly cpuPerCallPercent: number;
  /** Hearing alone (main thread and VAD worker), % of a core per call in real time. */
  readonly hearingCpuPerCallPercent: number;
  readonly callSeconds: number;
}

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

/** What the bench needs of a running platform: its origin, clock and voice service, and a user. */
export interface TurnsPlatform {
  readonly origin: string;
  readonly clock: ManualClock;
  readonly platform: RunningPlatform;
  readonly token: string;
}

async function api(p: TurnsPlatform, method: string, path: string, body?: unknown, token = p.token): Promise<any> {
  const response = await fetch(`${p.origin}/api${path}`, { method, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: body === undefined ? undefined : JSON.stringify(body) });
  return response.json();
}

/** An inbound assistant of the user with a number of its own; returns the number callers dial. Not concurrent: purchases would race for the same offer. */
export async function inboundAssistant(p: TurnsPlatform, fields: Record<string, unknown>): Promise<string> {
  const owned = new Set(((await api(p, 'GET', '/user/phone-numbers/all')).data ?? []).map((n: { phone_number: string }) => n.phone_number));
  const offers = (await api(p, 'GET', '/user/phone-numbers/search?country_code=US')).data as Array<{ phone_number: string }>;
  const offer = offers.find((o) => !owned.has(o.phone_number));
  if (!offer) throw new Error('no number to buy');
  await api(p, 'POST', '/user/phone-numbers/purchase', { phone_number: offer.phone_number });
  const row = (await api(p, 'GET', '/user/phone-numbers/all')).data.find((n: { phone_number: string }) => n.phone_number === offer.phone_number);
  const created = await api(p, 'POST', '/user/assistant', { name: 'Turns', type: 'inbound', language_id: 1, ...DEV_ASSISTANT, phone_number_id: row.id, ...fields });
  if (!created.data) throw new Error(`could not create the assistant: ${JSON.stringify(created)}`);
  return offer.phone_number;
}

let sids = 0;

/** A call to `number` as Twilio places it (voice webhook, then the media stream). */
export async function dialIn(p: TurnsPlatform, number: string): Promise<CorpusCaller> {
  const callSid = `CAb${(++sids).toString(16).padStart(31, '0')}`;
  const form = new URLSearchParams({ To: number, From: '+14155550199', CallSid: callSid });
  const twiml = await (await fetch(`${p.origin}/api/telephony/twilio/inbound`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() })).text();
  const url = /<Stream url="([^"]+)"/.exec(twiml)?.[1];
  const callId = /name="call_id" value="(\d+)"/.exec(twiml)?.[1];
  const token = /name="token" value="([^"]+)"/.exec(twiml)?.[1];
  if (!url || !callId || !token) throw new Error(`unexpected TwiML: ${twiml}`);
  const caller = new CorpusCaller(url.replace(/&amp;/g, '&'), callSid, { call_id: callId, token }, Number(callId));
  await caller.phone.open();
  await caller.phone.sync();
  return caller;
}

/** Hangs up and returns the call's saved transcript. */
export async function hangUpAndRead(p: TurnsPlatform, caller: CorpusCaller): Promise<string> {
  caller.phone.hangUp();
  await p.platform.runtime.services.voice.whenEnded(caller.callId);
  return (await api(p, 'GET', `/user/calls/${caller.callId}`)).data?.transcript ?? '';
}

export interface Job {
  readonly clip: Clip;
  readonly role: Role;
}

export interface JobOutcome extends Job, Partial<PauseOutcome>, Partial<OverAgentOutcome> {
  /** The agent resumed after a clear: audible again, and the whole greeting is in the transcript. */
  resumed?: boolean;
  /** Simulated ms the call lasted. */
  elapsedMs: number;
}

const GREETING_END = LONG_GREETING.split(' ').slice(-5).join(' ');

/** Plays `jobs` in batches of `concurrency` calls; numbers per role and language come from `numbers`. */
export async function playJobs(p: TurnsPlatform, jobs: readonly Job[], numbers: (role: Role, language: string) => Promise<string>, concurrency: number): Promise<{ outcomes: JobOutcome[]; cpuMs: number }> {
  const outcomes: JobOutcome[] = [];
  let cpuMs = 0;
  const thinking = (callId: number) => p.platform.runtime.services.voice.session(callId)?.agentState === 'thinking';
  for (let i = 0; i < jobs.length; i += concurrency) {
    const batch = jobs.slice(i, i + concurrency);
    const calls = await Promise.all(batch.map(async (job) => {
      const caller = await dialIn(p, await numbers(job.role, job.clip.label.language));
      const outcome: JobOutcome = { ...job, elapsedMs: 0 };
      const frames = clipFrames(job.clip);
      const script: Script = job.role === 'talk' ? overAgentScript(caller, job.clip, frames, outcome) : pauseScript(caller, job.clip, frames, outcome);
      return { caller, script, outcome };
    }));
    const cpu = process.cpuUsage();
    await lockstep(p.clock, calls, thinking, () => p.platform.runtime.vad.settled());
    const used = process.cpuUsage(cpu);
    cpuMs += (used.user + used.system) / 1000;
    for (const { caller, outcome } of calls) {
      const transcript = await hangUpAndRead(p, caller);
      outcome.elapsedMs = caller.elapsed;
      if (outcome.role === 'talk') outcome.resumed = Boolean(outcome.cleared && outcome.audibleAfterClear && transcript.includes(GREETING_END));
      outcomes.push(outcome);
    }
  }
  return { outcomes, cpuMs };
}

/** Each pause clip for both endpoint types; each other clip over the agent. */
export function jobsFor(clips: readonly Clip[]): Job[] {
  return clips.flatMap((clip): Job[] => (clip.label.kind === 'pause' ? [{ clip, role: 'listen-vad' }, { clip, role: 'listen-ai' }] : [{ clip, role: 'talk' }]));
}

export function summarize(vad: string, outcomes: readonly JobOutcome[], cpuMs: number, interruptMs = 500, hearingMs = Number.NaN): TurnsResult {
  const pauses = { vad: {}, ai: {} } as TurnsResult['pauses'];
  const noisyPauses = {} as TurnsResult['noisyPauses'];
  const answerP50 = { vad: 0, ai: 0 };
  const noisyAnswerP50 = { vad: 0, ai: 0 };
  const answered = (runs: readonly JobOutcome[]) => percentile(runs.filter((o) => !o.cutOff && o.answerAfterMs !== undefined).map((o) => o.answerAfterMs!), 50);
  const count = (runs: readonly JobOutcome[]) => ({ clips: runs.length, cutOffs: runs.filter((o) => o.cutOff).length });
  for (const type of ['vad', 'ai'] as const) {
    const runs = outcomes.filter((o) => o.role === `listen-${type}` && o.cutOff !== undefined);
    const clean = runs.filter((o) => !o.clip.label.background);
    const noisy = runs.filter((o) => o.clip.label.background);
    for (const ms of PAUSES_MS) pauses[type][ms] = count(clean.filter((o) => o.clip.label.pauses[0]?.nominalMs === ms));
    noisyPauses[type] = count(noisy);
    answerP50[type] = answered(clean);
    noisyAnswerP50[type] = answered(noisy);
  }
  const over = outcomes.filter((o) => o.role === 'talk' && o.overAgent);
  const falseOnes = (kind: string) => {
    const runs = over.filter((o) => o.clip.label.kind === kind);
    const paused = runs.filter((o) => o.cleared);
    return { clips: runs.length, paused: paused.length, resumed: paused.filter((o) => o.resumed).length, interrupted: paused.filter((o) => !o.resumed).length };
  };
  const barges = over.filter((o) => o.clip.label.kind === 'interruption');
  const latencies = barges.filter((o) => o.clearAfterMs !== undefined && o.clearAfterMs >= 0).map((o) => o.clearAfterMs!);
  const missed = barges.filter((o) => o.clearAfterMs === undefined).length;
  const callMs = outcomes.reduce((sum, o) => sum + o.elapsedMs, 0);
  return {
    vad,
    pauses,
    noisyPauses,
    answerAfterP50Ms: answerP50,
    noisyAnswerAfterP50Ms: noisyAnswerP50,
    backchannels: falseOnes('backchannel'),
    noise: falseOnes('noise'),
    bargeIn: { clips: barges.length, missed, early: barges.length - missed - latencies.length, p50Ms: percentile(latencies, 50), p95Ms: percentile(latencies, 95), late: missed + latencies.filter((ms) => ms > interruptMs + BARGE_IN_SLACK_MS).length, resumed: barges.filter((o) => o.resumed).length },
    notOverAgent: outcomes.filter((o) => o.role === 'talk' && !o.overAgent).length,
    cpuPerCallPercent: callMs > 0 ? (cpuMs / callMs) * 100 : Number.NaN,
    hearingCpuPerCallPercent: callMs > 0 ? (hearingMs / callMs) * 100 : Number.NaN,
    callSeconds: callMs / 1000,
  };
}

/**
 * The CPU of hearing alone in the run (the bench's own wrapper, so the 20 ms path carries no
 * timer in production): every `Hearing.hear` less the time in its hooks, which are the session's
 * work (pausing the playout, starting the agent's answer at the end of a turn). The process's CPU
 * around each synchronous call, not the wall time, so a busy host's preemption is not counted. The
 * simulated callers wait for the VAD worker between rounds, so it is mostly idle meanwhile; its
 * own time is added apart.
 */
function timeHearing(): { readonly ms: number; stop(): void } {
  const original = Hearing.prototype.hear;
  const timed = { ms: 0, stop: () => { Hearing.prototype.hear = original; } };
  const cpuMs = (start: NodeJS.CpuUsage) => {
    const used = process.cpuUsage(start);
    return (used.user + used.system) / 1000;
  };
  const wrapped = new WeakSet<object>();
  let inside = false;
  Hearing.prototype.hear = function hear(this: Hearing, input: Int16Array) {
    const self = this as unknown as { hooks: Record<string, unknown> };
    if (!wrapped.has(self)) {
      wrapped.add(self);
      self.hooks = Object.fromEntries(Object.entries(self.hooks).map(([name, hook]) => [name, typeof hook !== 'function' ? hook : (...args: unknown[]) => {
        if (!inside) return hook(...args);
        const start = process.cpuUsage();
        try {
          return hook(...args);
        } finally {
          timed.ms -= cpuMs(start);
        }
      }]));
    }
    const start = process.cpuUsage();
    inside = true;
    try {
      original.call(this, input);
    } finally {
      inside = false;
      timed.ms += cpuMs(start);
    }
  };
  return timed;
}

/**
 * One VAD's run: its own platform (VOICE_VAD passed to the configuration) on a manual clock. The
 * dev voice is the tone: espeak's worker answers in real time, which a simulated clock outruns.
 */
async function runOne(vad: string, clips: readonly Clip[], options: { concurrency: number; config?: Partial<Config>; onOutcome?: TurnsOptions['onOutcome'] }): Promise<TurnsResult> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-turns-'));
  const adminToken = 'bench-admin-token-0123456789';
  const clock = new ManualClock(Date.UTC(2026, 10, 24, 10, 0, 0));
  const config = loadConfig({ ...process.env, VOICE_VAD: vad }, { port: 0, host: '127.0.0.1', dataDir, logLevel: 'silent', adminToken, acceptUnsignedCarrierWebhooks: true, devVoice: 'tone', rateLimits: { perIp: { capacity: 1e6, perMinute: 1e6 }, perConversation: { capacity: 1e6, perMinute: 1e6 } }, ...options.config });
  const platform = await startPlatform(config, createLogger('silent'), { clock });
  try {
    const origin = platform.origin;
    const registered = await (await fetch(`${origin}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Bench', email: `turns-${Date.now()}@example.com`, password: 'bench password' }) })).json() as any;
    const p: TurnsPlatform = { origin, clock, platform, token: registered.token };
    await api(p, 'POST', `/admin/users/${registered.user.id}/balance`, { amount: 1_000_000, reason: 'bench' }, adminToken);
    const numbers = new Map<string, Promise<string>>();
    let made: Promise<unknown> = Promise.resolve();
    const numberFor = (role: Role, language: string) => {
      const key = `${role} ${language}`;
      if (!numbers.has(key)) {
        const fields = { language_id: LANGUAGE_IDS[language] ?? 1, initial_message: role === 'talk' ? LONG_GREETING : 'Hello.', ...(role === 'listen-ai' ? { endpoint_type: 'ai' } : {}) };
        const number = made.then(() => inboundAssistant(p, fields));
        made = number;
        numbers.set(key, number);
      }
      return numbers.get(key)!;
    };
    const hearing = timeHearing();
    const { outcomes, cpuMs } = await playJobs(p, jobsFor(clips), numberFor, options.concurrency).finally(() => hearing.stop());
    options.onOutcome?.(vad, outcomes);
    const engine = (platform.runtime.vad as { engine?: { inferMs: number } }).engine;
    return summarize(vad, outcomes, cpuMs, undefined, hearing.ms + (engine?.inferMs ?? 0));
  } finally {
    await platform.close({ graceMs: 0, hurry: Promise.resolve() });
    await rm(dataDir, { recursive: true, force: true });
  }
}

export interface TurnsOptions {
  /** VAD names passed as VOICE_VAD, each run on its own platform. */
  readonly vads: readonly string[];
  readonly corpusDir: string;
  /** Clips of the plan to play (all by default). */
  readonly select?: (spec: ClipSpec, index: number) => boolean;
  readonly concurrency?: number;
  readonly config?: Partial<Config>;
  /** Every call's outcome, per VAD (for a detailed report). */
  readonly onOutcome?: (vad: string, outcomes: readonly JobOutcome[]) => void;
}

export async function runTurnsBench(options: TurnsOptions): Promise<TurnsResult[]> {
  const missing = missingCorpusTools();
  if (missing) throw new Error(`the corpus cannot be built: ${missing}`);
  const corpus = await loadCorpus({ dir: options.corpusDir, clips: corpusPlan().filter((spec, i) => options.select?.(spec, i) ?? true) });
  const results: TurnsResult[] = [];
  for (const vad of options.vads) results.push(await runOne(vad, corpus.clips, { concurrency: options.concurrency ?? 8, config: options.config, onOutcome: options.onOutcome }));
  return results;
}

const ms = (value: number) => (Number.isNaN(value) ? 'n/a' : value.toFixed(0));
const pct = (n: number, of: number) => (of === 0 ? 'n/a' : `${((100 * n) / of).toFixed(1)}% (${n}/${of})`);

export function formatTurns(results: readonly TurnsResult[]): string {
  const rows = results.map((r) => [
    r.vad,
    ...(['vad', 'ai'] as const).map((type) => PAUSES_MS.map((ms) => pct(r.pauses[type][ms]!.cutOffs, r.pauses[type][ms]!.clips)).join(' / ')),
    `${ms(r.answerAfterP50Ms.vad)} / ${ms(r.answerAfterP50Ms.ai)}`,
    `${pct(r.noisyPauses.vad.cutOffs, r.noisyPauses.vad.clips)} / ${pct(r.noisyPauses.ai.cutOffs, r.noisyPauses.ai.clips)}`,
    `${ms(r.noisyAnswerAfterP50Ms.vad)} / ${ms(r.noisyAnswerAfterP50Ms.ai)}`,
    pct(r.backchannels.interrupted, r.backchannels.clips),
    pct(r.noise.interrupted, r.noise.clips),
    `${r.backchannels.resumed + r.noise.resumed} of ${r.backchannels.paused + r.noise.paused}`,
    `${ms(r.bargeIn.p50Ms)} / ${ms(r.bargeIn.p95Ms)}`,
    `${r.bargeIn.late} of ${r.bargeIn.clips - r.bargeIn.early} (${r.bargeIn.missed} never, ${r.bargeIn.resumed} resumed over)`,
    `${r.bargeIn.early}`,
    r.cpuPerCallPercent.toFixed(2),
    r.hearingCpuPerCallPercent.toFixed(3),
  ]);
  return [
    'Turn-taking on the speech corpus (Twilio protocol, manual clock, dev model/voice/transcriber, default settings)',
    '',
    '| VAD | false cut-offs, endpoint vad: 500 / 700 / 1,000 ms pause | endpoint ai: 500 / 700 / 1,000 ms | answer after last word p50 ms (vad / ai) | with TV or music: false cut-offs, every pause (vad / ai) | answer after last word p50 ms (vad / ai) | false interruptions (the agent stopped for good): backchannels | noise | paused and resumed, of those paused | barge-in clear p50 / p95 ms | barge-ins late (> interrupt + 150 ms), of those not cleared early (never cleared, resumed over) | barge-ins cleared before the caller spoke | CPU % of a core per call | of which hearing |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((row) => `| ${row.join(' | ')} |`),
    ...results.filter((r) => r.notOverAgent > 0).map((r) => `\n${r.vad}: ${r.notOverAgent} clips found the agent silent and are not counted.`),
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [concurrency = 8, every = 1] = process.argv.slice(2).map(Number);
  const vads = (process.env.VOICE_VAD ?? 'energy').split(',').map((v) => v.trim()).filter(Boolean);
  const corpusDir = join(process.env.DATA_DIR ?? tmpdir(), 'turns-corpus');
  // TURNS_DETAIL=1 lists every call's outcome on stderr.
  const detail = process.env.TURNS_DETAIL === '1';
  const onOutcome = (vad: string, outcomes: readonly JobOutcome[]) => {
    for (const { clip, role, elapsedMs: _, ...rest } of outcomes) console.error(JSON.stringify({ vad, clip: clip.label.id, role, ...rest }));
  };
  const results = await runTurnsBench({ vads, corpusDir, concurrency, select: (_spec, i) => i % every === 0, onOutcome: detail ? onOutcome : undefined });
  console.log(formatTurns(results));
}
