import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { startPlatform } from '../api/platform.js';
import { loadConfig } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';

/**
 * REST throughput of this server on loopback: the health check (no database), an authenticated
 * read (token lookup plus a user row), and JSON validation that fails before any query.
 * Runs on the embedded database in a throw-away DATA_DIR unless DATABASE_URL is set.
 * Usage: `npm run bench:rest [-- seconds]` (default 5 s per operation, 50 connections).
 */

const seconds = Number(process.argv[2] ?? 5);
const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-'));
const config = loadConfig(process.env, { port: 0, dataDir, logLevel: 'silent' });
const platform = await startPlatform(config, createLogger('silent'));
const origin = platform.origin;

const registered = (await fetch(`${origin}/api/auth/register`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ name: 'Bench', email: `bench-${Date.now()}@example.com`, password: 'bench password' }),
}).then((r) => r.json())) as { token: string };

const cases = [
  { name: 'GET /health', path: '/health', method: 'GET' as const },
  { name: 'GET /api/user (authenticated)', path: '/api/user', method: 'GET' as const, headers: { authorization: `Bearer ${registered.token}` } },
  { name: 'POST /api/user/api-keys (422)', path: '/api/user/api-keys', method: 'POST' as const, headers: { authorization: `Bearer ${registered.token}`, 'content-type': 'application/json' }, body: '{}' },
];

console.log(`REST on ${origin}, ${seconds}s each, 50 connections`);
console.log('| operation | req/s | p50 ms | p99 ms | non-2xx |');
console.log('|---|---|---|---|---|');
for (const c of cases) {
  const result = await autocannon({ url: `${origin}${c.path}`, method: c.method, headers: c.headers, body: c.body, connections: 50, duration: seconds });
  console.log(`| ${c.name} | ${Math.round(result.requests.average)} | ${result.latency.p50} | ${result.latency.p99} | ${result.non2xx} |`);
}

await platform.close();
await rm(dataDir, { recursive: true, force: true });
