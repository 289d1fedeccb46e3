import { mkdtemp, rm } from 'node:fs/promises';
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

export interface ChatResult {
  readonly messagesPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly sockets: number;
  /** JavaScript heap per idle socket (exact). */
  readonly heapKbPerSocket: number;
  /** Process memory per idle socket, uWS's native part included (rough: allocator noise). */
  readonly kbPerSocket: number;
}

export async function runChatBench(options: { seconds: number; sockets: number; config?: Partial<Config> }): Promise<ChatResult> {
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
    // The idle sockets as visitors keep them: a few tabs on each conversation (at most 16 are let in per conversation).
    const watched: string[] = [];
    const perHalf = (count: number) => Math.ceil(count / SOCKETS_PER_CONVERSATION);
    for (let i = 0; i < perHalf(Math.floor(options.sockets / 2)) + perHalf(Math.ceil(options.sockets / 2)); i++) watched.push(await conversation());
    const clients = fork(fileURLToPath(new URL('./sockets.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    // After a collection (`--expose-gc`, as the npm scripts run it): the heap's live objects (exact),
    // and what the process holds beside the heap's pages (uWS's own socket memory is only there;
    // the allocator's give and take makes it a rough figure, a few MB either way).
    const settled = () => {
      (globalThis as { gc?: () => void }).gc?.();
      const { rss, heapTotal, heapUsed } = process.memoryUsage();
      return { heap: heapUsed, total: rss - heapTotal + heapUsed };
    };
    const url = origin.replace(/^http/, 'ws');
    const open = async (conversations: string[], count: number) => {
      const opened = await new Promise<number>((resolve) => {
        clients.once('message', (reply: { opened: number }) => resolve(reply.opened));
        clients.send({ open: { urls: conversations.map((id) => `${url}/ws/conversations/${id}`), count } });
      });
      // The first socket of a conversation reads where it stands: let those reads land.
      await new Promise((resolve) => setTimeout(resolve, 500));
      return opened;
    };
    // Half the sockets first, then the other half, on conversations of their own, measured: the
    // first absorbs what the setup's garbage and the allocator's first growth would otherwise add,
    // or take away, as noise; the second pays what each conversation watched costs too.
    const half = Math.floor(options.sockets / 2);
    const split = Math.ceil(half / SOCKETS_PER_CONVERSATION);
    const first = await open(watched.slice(0, split), half);
    const before = settled();
    const opened = await open(watched.slice(split), options.sockets - half);
    const after = settled();
    const measured = opened - first;
    clients.disconnect();
    let next = 0;
    const result = await autocannon({
      url: origin,
      connections: 50,
      duration: options.seconds,
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
      p50: result.latency.p50,
      p99: result.latency.p99,
      errors: result.non2xx + result.errors,
      sockets: opened,
      heapKbPerSocket: measured ? (after.heap - before.heap) / 1024 / measured : 0,
      kbPerSocket: measured ? (after.total - before.total) / 1024 / measured : 0,
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
    '| messages/s | p50 ms | p99 ms | errors | idle widget sockets | heap KB per socket | process KB per socket (rough) |',
    '|---|---|---|---|---|---|---|',
    `| ${Math.round(result.messagesPerSecond)} | ${result.p50} | ${result.p99} | ${result.errors} | ${result.sockets} | ${result.heapKbPerSocket.toFixed(2)} | ${result.kbPerSocket.toFixed(1)} |`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [seconds = 10, sockets = 10_000] = process.argv.slice(2).map(Number);
  console.log(formatChat(await runChatBench({ seconds, sockets })));
}
