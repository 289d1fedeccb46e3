import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { startPlatform, type RunningPlatform } from '../api/platform.js';
import { loadConfig, type Config } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';
import { signHub, startWhatsAppFake, textMessageWebhook, type WhatsAppFake } from '../test/fakes/whatsapp.js';
import { percentile } from './calls.js';

/**
 * WhatsApp conversations at load, on one platform process with its embedded database, the dev
 * model (the assistant's model has no provider configured) and a local fake of the Graph API:
 * 1. intake: `customers` customers at once, each sending `messages` texts one after the other
 *    (the next once the previous is acknowledged, as Meta delivers a sender's messages), as signed
 *    notifications to `POST /api/channels/whatsapp/webhook`; the acknowledgement latency
 *    (p50/p95/p99) and notifications acknowledged per second;
 * 2. end to end: from the first notification until every reply reached the fake Graph API,
 *    replies per second, and each message's time from its notification to its reply; every
 *    customer must receive exactly one reply per message, in the order written (the bench throws
 *    otherwise);
 * 3. duplicates: every notification posted again, byte for byte (Meta's retries): each must be
 *    acknowledged and none answered again (the bench throws otherwise);
 * 4. the process's event-loop delay (p99, max) over the three parts, and its resident memory
 *    before, at its peak and after.
 * The customers' requests and the fake Graph API run in the same process as the platform (bodies
 * and signatures are made before the clock starts): the event-loop figures include their share.
 * Usage: `npm run bench:channels [-- customers [messages]]` (default 100 customers × 5 messages: under a minute on 2 cores).
 */

export interface ChannelsBenchOptions {
  readonly customers: number;
  /** Messages each customer sends. */
  readonly messages: number;
  /** An existing database (tests); otherwise the embedded one in a throw-away DATA_DIR. */
  readonly config?: Partial<Config>;
  /** How long every reply may take to arrive before the run is failed. @defaultValue 120 s */
  readonly timeoutMs?: number;
}

interface Latencies {
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
}

export interface ChannelsBenchResult {
  readonly customers: number;
  readonly messages: number;
  readonly intake: Latencies & { readonly seconds: number; readonly perSecond: number };
  /** From the first notification to the last reply taken by the Graph API; `latency`: notification sent to its reply taken, ms. */
  readonly endToEnd: {
    readonly seconds: number;
    readonly replies: number;
    readonly perSecond: number;
    readonly latency: Latencies;
    /** The process's CPU time (all threads; the customers' side and the fake's included) over intake and answering, per message. */
    readonly cpuMsPerMessage: number;
  };
  readonly duplicates: Latencies & { readonly posted: number; readonly acknowledged: number; readonly answeredAgain: number };
  readonly eventLoop: { readonly p99Ms: number; readonly maxMs: number };
  readonly rssMb: { readonly before: number; readonly peak: number; readonly after: number };
}

const ADMIN_TOKEN = 'bench-admin-token-0123456789';
const PHONE_NUMBER_ID = '106540352242922';
const ACCESS_TOKEN = 'EAAG-bench-access-token';
const APP_SECRET = 'bench-app-secret';
/** The dev model's answer to a message that is not small talk and names no tool. */
const devReply = (text: string) => `Thanks for your message. You wrote: "${text}"`;

interface Notification {
  readonly customer: number;
  readonly raw: string;
  readonly signature: string;
  /** When it was first posted (performance.now()). */
  postedAt: number;
}

/** A platform with one owner, an assistant on the dev model and a WhatsApp channel to it. */
async function setUp(graph: WhatsAppFake, options: ChannelsBenchOptions, dataDir: string): Promise<RunningPlatform> {
  const config = loadConfig(process.env, {
    port: 0,
    dataDir,
    logLevel: 'silent',
    adminToken: ADMIN_TOKEN,
    channels: { whatsappApiUrl: graph.apiUrl, whatsappApiVersion: 'v21.0', secretsKey: undefined },
    ...options.config,
  });
  const platform = await startPlatform(config, createLogger('silent'));
  const call = async (method: string, path: string, body?: unknown, token?: string) => {
    const response = await fetch(`${platform.origin}/api${path}`, { method, headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
    const answer = (await response.json()) as any;
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(answer)}`);
    return answer;
  };
  const user = await call('POST', '/auth/register', { name: 'Bench', email: `bench-${Date.now()}@example.com`, password: 'bench password' });
  await call('POST', `/admin/users/${user.user.id}/balance`, { amount: 1_000_000, reason: 'bench' }, ADMIN_TOKEN);
  const assistant = await call('POST', '/user/assistant', { name: 'Channels', voice_id: 1, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hi', system_prompt: 'Help', llm_model_id: 6 }, user.token);
  await call('POST', '/user/channels', { type: 'whatsapp', assistant_id: assistant.data.id, phone_number_id: PHONE_NUMBER_ID, access_token: ACCESS_TOKEN, app_secret: APP_SECRET, verify_token: 'bench-verify-token' }, user.token);
  return platform;
}

/** A customer's number; the warm-up's customers (`first` 1,000,000) are not the measured ones. */
const customerNumber = (customer: number, first = 2_000_000) => `+1555${String(first + customer).padStart(7, '0')}`;
const messageText = (customer: number, message: number) => `Order question ${message + 1} from customer ${customer + 1}`;

/** Each customer's notifications, in the order they write them, signed as Meta signs them. */
function notifications(customers: number, messages: number, prefix: string, first?: number): Notification[][] {
  return Array.from({ length: customers }, (_, customer) =>
    Array.from({ length: messages }, (_, message) => {
      const raw = JSON.stringify(textMessageWebhook({ phoneNumberId: PHONE_NUMBER_ID, from: customerNumber(customer, first), id: `wamid.${prefix}.${customer}.${message}`, text: messageText(customer, message), name: 'Bench' }));
      return { customer, raw, signature: signHub(APP_SECRET, raw), postedAt: 0 };
    }),
  );
}

/**
 * Posts every customer's notifications at once across customers, one after the other within
 * each. @returns each acknowledgement's latency, ms. @throws when one is not acknowledged (200).
 */
async function postAll(origin: string, byCustomer: Notification[][]): Promise<number[]> {
  const latencies: number[] = [];
  await Promise.all(
    byCustomer.map(async (sequence) => {
      for (const notification of sequence) {
        const started = performance.now();
        if (notification.postedAt === 0) notification.postedAt = started;
        const response = await fetch(`${origin}/api/channels/whatsapp/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': notification.signature }, body: notification.raw });
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`a notification was answered ${response.status}, not 200`);
        latencies.push(performance.now() - started);
      }
    }),
  );
  return latencies;
}

/** The times (performance.now()) the Graph API took texts `from` to `from + count - 1`. @throws when they do not all come within `timeoutMs`. */
async function replyTimes(graph: WhatsAppFake, from: number, count: number, timeoutMs: number): Promise<number[]> {
  const times: number[] = [];
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${graph.sent.length - from} of ${count} replies reached the Graph API in ${timeoutMs / 1000} s`)), timeoutMs);
  });
  try {
    while (times.length < count) {
      await Promise.race([graph.waitForSent(from + times.length + 1), late]);
      const now = performance.now();
      while (times.length < count && from + times.length < graph.sent.length) times.push(now);
    }
    return times;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Each customer's replies, checked: exactly one per message, in the order written, and none to
 * anyone else. @returns each message's time from notification to reply, ms. @throws otherwise.
 */
function checkedReplyLatencies(graph: WhatsAppFake, from: number, times: readonly number[], byCustomer: readonly Notification[][]): number[] {
  const customerOf = new Map(byCustomer.map((_, customer) => [customerNumber(customer).slice(1), customer]));
  const received = byCustomer.map(() => [] as Array<{ text: string; at: number }>);
  graph.sent.slice(from).forEach((sent, i) => {
    const customer = customerOf.get(sent.to);
    if (customer === undefined) throw new Error(`a reply went to ${sent.to}, who wrote nothing`);
    received[customer]!.push({ text: sent.text, at: times[i]! });
  });
  const latencies: number[] = [];
  received.forEach((replies, customer) => {
    const expected = byCustomer[customer]!.map((_, message) => devReply(messageText(customer, message)));
    const got = replies.map((reply) => reply.text);
    if (got.length !== expected.length || got.some((text, i) => text !== expected[i])) {
      throw new Error(`customer ${customer + 1} received ${JSON.stringify(got)}, not one reply per message in order: ${JSON.stringify(expected)}`);
    }
    replies.forEach((reply, message) => latencies.push(reply.at - byCustomer[customer]![message]!.postedAt));
  });
  return latencies;
}

function latencies(values: number[]): Latencies {
  return { p50: percentile(values, 50), p95: percentile(values, 95), p99: percentile(values, 99), max: Math.max(...values) };
}

export async function runChannelsBench(options: ChannelsBenchOptions): Promise<ChannelsBenchResult> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-channels-'));
  const graph = await startWhatsAppFake({ [PHONE_NUMBER_ID]: ACCESS_TOKEN });
  let platform: RunningPlatform | undefined;
  try {
    platform = await setUp(graph, options, dataDir);
    const { channels } = platform.runtime.services;
    // A first exchange outside the figures: the statements and code paths warm.
    const warm = notifications(4, 2, 'warm', 1_000_000);
    await postAll(platform.origin, warm);
    await replyTimes(graph, 0, 8, options.timeoutMs ?? 120_000);
    await channels.idle();

    const byCustomer = notifications(options.customers, options.messages, 'bench');
    const total = options.customers * options.messages;
    const from = graph.sent.length;
    (globalThis as { gc?: () => void }).gc?.();
    const rssBefore = process.memoryUsage.rss();
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage.rss())), 50);
    const loop = monitorEventLoopDelay({ resolution: 5 });
    loop.enable();

    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const replies = replyTimes(graph, from, total, options.timeoutMs ?? 120_000);
    const acknowledged = await postAll(platform.origin, byCustomer);
    const intakeSeconds = (performance.now() - started) / 1000;
    const times = await replies;
    const endToEndSeconds = (times.at(-1)! - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    await channels.idle();
    const answered = graph.sent.length;
    const replyLatencies = checkedReplyLatencies(graph, from, times, byCustomer);

    const again = await postAll(platform.origin, byCustomer);
    await channels.idle();
    const answeredAgain = graph.sent.length - answered;
    if (answeredAgain !== 0) throw new Error(`${answeredAgain} duplicate notifications were answered again`);

    loop.disable();
    clearInterval(sampler);
    const rssAfter = process.memoryUsage.rss();
    return {
      customers: options.customers,
      messages: options.messages,
      intake: { ...latencies(acknowledged), seconds: intakeSeconds, perSecond: total / intakeSeconds },
      endToEnd: { seconds: endToEndSeconds, replies: times.length, perSecond: times.length / endToEndSeconds, latency: latencies(replyLatencies), cpuMsPerMessage: (cpu.user + cpu.system) / 1000 / total },
      duplicates: { ...latencies(again), posted: total, acknowledged: again.length, answeredAgain },
      eventLoop: { p99Ms: loop.percentile(99) / 1e6, maxMs: loop.max / 1e6 },
      rssMb: { before: rssBefore / 1e6, peak: Math.max(rssPeak, rssAfter) / 1e6, after: rssAfter / 1e6 },
    };
  } finally {
    await platform?.close();
    await graph.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

export function formatChannels(result: ChannelsBenchResult): string {
  const { intake, endToEnd, duplicates, eventLoop, rssMb } = result;
  const ms = (l: Latencies) => `${l.p50.toFixed(1)} / ${l.p95.toFixed(1)} / ${l.p99.toFixed(1)}`;
  return [
    `WhatsApp channel (dev model, fake Graph API, one process): ${result.customers} customers at once × ${result.messages} messages each, ${result.customers * result.messages} signed notifications`,
    '',
    '| part | count | seconds | per second | ms p50 / p95 / p99 |',
    '|---|---|---|---|---|',
    `| intake: notifications acknowledged | ${result.customers * result.messages} | ${intake.seconds.toFixed(2)} | ${Math.round(intake.perSecond)} | ${ms(intake)} |`,
    `| end to end: replies taken by the Graph API (latency: notification to reply) | ${endToEnd.replies} | ${endToEnd.seconds.toFixed(2)} | ${Math.round(endToEnd.perSecond)} | ${ms(endToEnd.latency)} |`,
    `| duplicates: the same notifications again, acknowledged | ${duplicates.acknowledged} | | | ${ms(duplicates)} |`,
    '',
    `Every customer received one reply per message, in order; duplicates answered again: ${duplicates.answeredAgain}. CPU of the process (server, customers and fake Graph API) ${endToEnd.cpuMsPerMessage.toFixed(1)} ms per message. Event-loop delay p99 ${eventLoop.p99Ms.toFixed(1)} ms, max ${eventLoop.maxMs.toFixed(1)} ms; RSS ${rssMb.before.toFixed(0)} MB before, ${rssMb.peak.toFixed(0)} MB at the peak (+${(rssMb.peak - rssMb.before).toFixed(0)}), ${rssMb.after.toFixed(0)} MB after (+${(rssMb.after - rssMb.before).toFixed(0)})`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [customers = 100, messages = 5] = process.argv.slice(2).map(Number);
  console.log(formatChannels(await runChannelsBench({ customers, messages })));
}
