import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { getHeapStatistics } from 'node:v8';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import { fork } from 'node:child_process';
import { startPlatform } from '../api/platform.js';
import { loadConfig, type Config } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';

/**
 * Text chat: messages per second through `POST /api/conversations/{uuid}/messages` with the dev
 * model, persistence and billing on (each message is stored, charged to the owner's ledger and
 * answered), spread over many conversations; then `sockets` idle widget sockets, 8 per conversation
 * (their clients in another process), and the server memory each costs.
 * Usage: `npm run bench:chat [-- seconds sockets]` (default 10 s, 10,000 sockets).
 */

/** Idle sockets per conversation in the memory measurement. */
const SOCKETS_PER_CONVERSATION = 8;
/** The share of the idle sockets opened before the first reading: it pays for first growth. */
const FIRST_SHARE = 0.1;

interface MemoryReading {
  readonly sockets: number;
  /** Live JavaScript heap, bytes. */
  readonly heap: number;
  /** Anonymous resident memory outside the main thread's JavaScript heap (uWS's sockets, buffers), bytes. */
  readonly native: number;
}

/**
 * The process's memory after a collection (`--expose-gc`): the live heap, and the anonymous
 * resident memory (Linux's RssAnon: RSS without mapped files, which no socket adds to) less the
 * heap's resident pages. The two are apart because the heap grows into pages it already holds: the
 * process's RSS then grows by less than the objects added, and by more when it takes new ones.
 * V8's memory reducer would hand idle heap pages back at a moment of its own (the worker threads'
 * heaps once their modules have loaded: 15 MB at once, more than 10,000 sockets take), so the npm
 * scripts run the benchmark with `--no-memory-reducer`.
 */
async function settledMemory(sockets: number): Promise<MemoryReading> {
  for (let i = 0; i < 3; i++) {
    (globalThis as { gc?: () => void }).gc?.();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const { rss, heapUsed } = process.memoryUsage();
  const status = await readFile('/proc/self/status', 'utf8').catch(() => '');
  const anonymousKb = /^RssAnon:\s+(\d+) kB$/m.exec(status)?.[1];
  const anonymous = anonymousKb === undefined ? rss : Number(anonymousKb) * 1024;
  return { sockets, heap: heapUsed, native: anonymous - getHeapStatistics().total_physical_size };
}

/** Memory per socket between two readings, in KB. */
export function memoryPerSocket(before: MemoryReading, after: MemoryReading): { heapKbPerSocket: number; nativeKbPerSocket: number } {
  const sockets = after.sockets - before.sockets;
  if (sockets <= 0) return { heapKbPerSocket: Number.NaN, nativeKbPerSocket: Number.NaN };
  return { heapKbPerSocket: (after.heap - before.heap) / 1024 / sockets, nativeKbPerSocket: (after.native - before.native) / 1024 / sockets };
}

export interface ChatResult {
  readonly messagesPerSecond: number;
  /** Messages answered in the run (the rate is their per-second average; a short run on a busy machine may answer some in no whole second). */
  readonly messages: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly sockets: number;
  /** JavaScript heap per idle socket (exact). */
  readonly heapKbPerSocket: number;
  /** Memory per idle socket outside the JavaScript heap: uWS's socket, its buffers (rough: allocator noise). */
  readonly nativeKbPerSocket: number;
}

/**
 * `seconds` bounds the run by time; `messages`, when given, by count instead (a smoke run on a busy
 * machine then answers that many however slowly, where one second might end before the first).
 */
export async function runChatBench(options: { seconds: number; sockets: number; messages?: number; config?: Partial<Config> }): Promise<ChatResult> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-chat-'));
  const adminToken = 'bench-admin-token-0123456789';
  const config = loadConfig(process.env, { port: 0, dataDir, logLevel: 'silent', adminToken, rateLimits: { perIp: { capacity: 1e9, perMinute: 1e9 }, perConversation: { capacity: 1e9, perMinute: 1e9 } }, ...options.config });
  const platform = await startPlatform(config, createLogger('silent'));
  const origin = platform.origin;
  const call = async (method: string, path: string, body?: unknown, token?: string) => {
    const response = await fetch(`${origin}/api${path}`, { method, headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
    return (await response.json()) as any;
  };
  try {
    const user = await call('POST', '/auth/register', { name: 'Bench', email: `bench-${Date.now()}@example.com`, password: 'bench password' });
    await call('POST', `/admin/users/${user.user.id}/balance`, { amount: 1_000_000, reason: 'bench' }, adminToken);
    const assistant = await call('POST', '/user/assistant', { name: 'Chat', voice_id: 1, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hi', system_prompt: 'Help', llm_model_id: 6 }, user.token);
    const read = await call('GET', `/user/assistant/${assistant.data.id}`, undefined, user.token);
    const conversation = async () => (await call('POST', '/conversations', { assistant_id: read.data.uuid, type: 'widget' })).conversation_id as string;
    const conversations: string[] = [];
    for (let i = 0; i < 100; i++) conversations.push(await conversation());
    // The idle sockets as visitors keep them: a few tabs on each conversation (at most 16 are let
    // in per conversation). A first tenth, then the rest on conversations of their own, measured.
    const firstCount = Math.ceil(options.sockets * FIRST_SHARE);
    const watched = async (sockets: number) => {
      const ids: string[] = [];
      for (let i = 0; i < Math.ceil(sockets / SOCKETS_PER_CONVERSATION); i++) ids.push(await conversation());
      return ids;
    };
    const firstConversations = await watched(firstCount);
    const restConversations = await watched(options.sockets - firstCount);
    const clients = fork(fileURLToPath(new URL('./sockets.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const url = origin.replace(/^http/, 'ws');
    /** Until no query runs or waits for a connection (at most a minute). */
    const settledPool = async () => {
      const by = performance.now() + 60_000;
      for (;;) {
        const { acquiredConnections, waitingClients } = platform.runtime.pool.state();
        if ((acquiredConnections === 0 && waitingClients === 0) || performance.now() > by) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const open = async (conversations: string[], count: number) => {
      const opened = await new Promise<number>((resolve) => {
        clients.once('message', (reply: { opened: number }) => resolve(reply.opened));
        clients.send({ open: { urls: conversations.map((id) => `${url}/ws/conversations/${id}`), count } });
      });
      // Each socket's conversation is looked up after it opens: let those reads land.
      await settledPool();
      return opened;
    };
    const before = await settledMemory(await open(firstConversations, firstCount));
    const after = await settledMemory(await open(restConversations, options.sockets - firstCount));
    clients.disconnect();
    let next = 0;
    const result = await autocannon({
      url: origin,
      connections: 50,
      ...(options.messages === undefined ? { duration: options.seconds } : { amount: options.messages }),
      requests: [
        {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ message: 'What are your opening hours?' }),
          setupRequest: (request) => ({ ...request, path: `/api/conversations/${conversations[next++ % conversations.length]}/messages` }),
        },
      ],
    });
    return {
      messagesPerSecond: result.requests.average,
      messages: result.requests.total,
      p50: result.latency.p50,
      p99: result.latency.p99,
      errors: result.non2xx + result.errors,
      sockets: after.sockets,
      ...memoryPerSocket(before, after),
    };
  } finally {
    await platform.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

export function formatChat(result: ChatResult): string {
  return [
    'Text chat (dev model, persistence and billing on, 100 conversations, 50 connections)',
    '',
    '| messages/s | p50 ms | p99 ms | errors | idle widget sockets | KB per socket: JavaScript heap + outside it = total |',
    '|---|---|---|---|---|---|',
    `| ${Math.round(result.messagesPerSecond)} | ${result.p50} | ${result.p99} | ${result.errors} | ${result.sockets} | ${result.heapKbPerSocket.toFixed(2)} + ${result.nativeKbPerSocket.toFixed(2)} = ${(result.heapKbPerSocket + result.nativeKbPerSocket).toFixed(2)} |`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [seconds = 10, sockets = 10_000] = process.argv.slice(2).map(Number);
  console.log(formatChat(await runChatBench({ seconds, sockets })));
}
