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
 * answered), spread over many conversations; then `sockets` idle widget sockets (their clients in
 * another process) and the server memory each costs.
 * Usage: `npm run bench:chat [-- seconds sockets]` (default 10 s, 10,000 sockets).
 */

export interface ChatResult {
  readonly messagesPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly sockets: number;
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
    const conversations: string[] = [];
    for (let i = 0; i < 100; i++) conversations.push((await call('POST', '/conversations', { assistant_id: read.data.uuid, type: 'widget' })).conversation_id);
    const clients = fork(fileURLToPath(new URL('./sockets.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const before = process.memoryUsage().rss;
    const url = origin.replace(/^http/, 'ws');
    const opened = await new Promise<number>((resolve) => {
      clients.once('message', (reply: { opened: number }) => resolve(reply.opened));
      clients.send({ open: { urls: conversations.map((id) => `${url}/ws/conversations/${id}`), count: options.sockets } });
    });
    const after = process.memoryUsage().rss;
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
      kbPerSocket: opened ? (after - before) / 1024 / opened : 0,
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
    '| messages/s | p50 ms | p99 ms | errors | idle widget sockets | server KB per socket |',
    '|---|---|---|---|---|---|',
    `| ${Math.round(result.messagesPerSecond)} | ${result.p50} | ${result.p99} | ${result.errors} | ${result.sockets} | ${result.kbPerSocket.toFixed(1)} |`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [seconds = 10, sockets = 10_000] = process.argv.slice(2).map(Number);
  console.log(formatChat(await runChatBench({ seconds, sockets })));
}
