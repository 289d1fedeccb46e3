import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPlatform } from '../api/platform.js';
import { loadConfig } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';
import { startBaseline } from './baseline/server.js';
import { OPERATIONS, type LoadResult, type LoadRun, type Operation } from './load.js';

/**
 * REST throughput on loopback, this server against a Fastify baseline (bench/baseline) that serves
 * the same operations over the same database pool, SQL and schemas, authenticating every request
 * with the token query as servers usually do; the platform answers repeated tokens from its
 * 5-second token cache, so its reads skip that round trip.
 * Operations: `GET /user/assistants/languages`, `GET /user/assistant/{id}`, and `POST /user/tools`
 * followed by `DELETE /user/tools/{id}` (one user per connection, so the plan-limit lock of one
 * user does not serialise them). autocannon runs in a process of its own (load.ts) for both servers
 * alike: in the servers' process its work per request, as much as a fast server's own, would be
 * counted against the server it measures.
 * Usage: `npm run bench:rest [-- seconds [warm-up seconds [rounds]]]` (default 3 alternating rounds
 * of 5 s per operation and server, after 1 s of warm-up each, 40 connections).
 */

const seconds = Number(process.argv[2] ?? 5);
const warmup = Number(process.argv[3] ?? 1);
const rounds = Number(process.argv[4] ?? 3);
const connections = 40;
const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-'));
const config = loadConfig(process.env, { port: 0, dataDir, logLevel: 'silent', databasePoolSize: 20 });
const platform = await startPlatform(config, createLogger('silent'));
const baseline = await startBaseline(platform.runtime);

const post = async (path: string, body: unknown, token?: string) =>
  (await (await fetch(`${platform.origin}/api${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) })).json()) as any;
// Registered together: each hashes its password with scrypt on libuv's pool, which runs several at once.
const users: Array<{ token: string; id: number }> = await Promise.all(
  Array.from({ length: connections }, async (_, i) => {
    const user = await post('/auth/register', { name: 'Bench', email: `bench-${Date.now()}-${i}@example.com`, password: 'bench password' });
    return { token: user.token as string, id: user.user.id as number };
  }),
);
const db = new pg.Client({ connectionString: platform.runtime.databaseUrl });
await db.connect();
await db.query(`UPDATE users SET plan = 'pro' WHERE id = ANY($1)`, [users.map((u) => u.id)]);
await db.end();
const token = users[0]!.token;
const assistant = await post('/user/assistant', { name: 'Bench', voice_id: 1, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hi', system_prompt: 'Help', llm_model_id: 1 }, token);

const load = fork(fileURLToPath(new URL('./load.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
const measure = (operation: Operation, origin: string, duration: number) =>
  new Promise<LoadResult>((resolve) => {
    load.once('message', (reply: { result: LoadResult }) => resolve(reply.result));
    const run: LoadRun = { operation, origin, seconds: duration, connections, tokens: users.map((u) => u.token), assistantId: assistant.data.id };
    load.send({ run });
  });

const mean = (results: LoadResult[], of: (r: LoadResult) => number) => results.reduce((sum, r) => sum + of(r), 0) / results.length;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
/** req/s is the mean of the rounds, p50 and p99 their medians, failures their sum. */
const row = (results: LoadResult[]) =>
  [Math.round(mean(results, (r) => r.requestsPerSecond)), median(results.map((r) => r.p50Ms)), median(results.map((r) => r.p99Ms)), results.reduce((sum, r) => sum + r.non2xx + r.errors, 0)].join(' | ');

console.log(`REST on loopback: this server (uWebSockets.js, token cache) against the Fastify baseline (token query per request), same database, SQL and schemas; ${rounds} alternating rounds of ${seconds}s each, ${connections} connections from autocannon in its own process`);
console.log('| operation | server | req/s | p50 ms | p99 ms | non-2xx | ratio |');
console.log('|---|---|---|---|---|---|---|');
for (const operation of OPERATIONS) {
  // Both servers warm up (JIT, pool connections) before either is measured.
  if (warmup > 0) {
    await measure(operation, platform.origin, warmup);
    await measure(operation, baseline.origin, warmup);
  }
  // Alternating rounds, so a drift of the host (another tenant, a CPU's frequency) weighs on both.
  const ours: LoadResult[] = [];
  const theirs: LoadResult[] = [];
  for (let round = 0; round < rounds; round++) {
    ours.push(await measure(operation, platform.origin, seconds));
    theirs.push(await measure(operation, baseline.origin, seconds));
  }
  const ratio = mean(ours, (r) => r.requestsPerSecond) / Math.max(1, mean(theirs, (r) => r.requestsPerSecond));
  console.log(`| ${operation} | platform | ${row(ours)} | ${ratio.toFixed(2)}× |`);
  console.log(`| ${operation} | Fastify baseline | ${row(theirs)} | |`);
}

load.disconnect();
await baseline.app.close();
await platform.close();
await rm(dataDir, { recursive: true, force: true });
