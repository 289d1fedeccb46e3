import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { startPlatform } from '../api/platform.js';
import { loadConfig } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';
import { startBaseline } from './baseline/server.js';

/**
 * REST throughput on loopback, this server against a Fastify baseline (bench/baseline) that serves
 * the same operations over the same database pool, SQL and schemas, authenticating every request
 * with the token query as servers usually do; the platform answers repeated tokens from its
 * 5-second token cache, so its reads skip that round trip.
 * Operations: `GET /user/assistants/languages`, `GET /user/assistant/{id}`, and `POST /user/tools`
 * followed by `DELETE /user/tools/{id}` (one user per connection, so the plan-limit lock of one
 * user does not serialise them). autocannon runs in this process for both servers alike.
 * Usage: `npm run bench:rest [-- seconds [warm-up seconds]]` (default 5 s per operation and server
 * after 1 s of warm-up each, 40 connections).
 */

const seconds = Number(process.argv[2] ?? 5);
const warmup = Number(process.argv[3] ?? 1);
const connections = 40;
const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-'));
const config = loadConfig(process.env, { port: 0, dataDir, logLevel: 'silent', databasePoolSize: 20 });
const platform = await startPlatform(config, createLogger('silent'));
const baseline = await startBaseline(platform.runtime);

const post = async (path: string, body: unknown, token?: string) =>
  (await (await fetch(`${platform.origin}/api${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) })).json()) as any;
const users: Array<{ token: string; id: number }> = [];
for (let i = 0; i < connections; i++) {
  const user = await post('/auth/register', { name: 'Bench', email: `bench-${Date.now()}-${i}@example.com`, password: 'bench password' });
  users.push({ token: user.token, id: user.user.id });
}
const db = new pg.Client({ connectionString: platform.runtime.databaseUrl });
await db.connect();
await db.query(`UPDATE users SET plan = 'pro' WHERE id = ANY($1)`, [users.map((u) => u.id)]);
await db.end();
const token = users[0]!.token;
const assistant = await post('/user/assistant', { name: 'Bench', voice_id: 1, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hi', system_prompt: 'Help', llm_model_id: 1 }, token);
const tool = JSON.stringify({ name: 'check_order', description: 'Looks up an order', endpoint: 'https://example.com/orders', method: 'GET', timeout: 5, schema: [{ name: 'order_id', type: 'string', description: 'The order id' }] });

type Case = { name: string; options: (origin: string) => autocannon.Options };
const auth = { authorization: `Bearer ${token}` };
const cases: Case[] = [
  { name: 'GET /user/assistants/languages', options: (origin) => ({ url: `${origin}/api/user/assistants/languages`, headers: auth }) },
  { name: 'GET /user/assistant/{id}', options: (origin) => ({ url: `${origin}/api/user/assistant/${assistant.data.id}`, headers: auth }) },
  {
    name: 'POST /user/tools + DELETE',
    options: (origin) => {
      let next = 0;
      return {
        url: origin,
        requests: [
          {
            method: 'POST',
            path: '/api/user/tools',
            body: tool,
            setupRequest: (request: any, context: any) => {
              context.token ??= users[next++ % users.length]!.token;
              return { ...request, headers: { 'content-type': 'application/json', authorization: `Bearer ${context.token}` } };
            },
            onResponse: (_status: number, body: string, context: any) => {
              context.toolId = JSON.parse(body)?.data?.id;
            },
          },
          {
            method: 'DELETE',
            setupRequest: (request: any, context: any) => ({ ...request, path: `/api/user/tools/${context.toolId}`, headers: { authorization: `Bearer ${context.token}` } }),
          },
        ],
      } as autocannon.Options;
    },
  },
];

console.log(`REST on loopback: this server (uWebSockets.js, token cache) against the Fastify baseline (token query per request), same database, SQL and schemas; ${seconds}s each, ${connections} connections`);
console.log('| operation | server | req/s | p50 ms | p99 ms | non-2xx | ratio |');
console.log('|---|---|---|---|---|---|---|');
for (const c of cases) {
  // Both servers warm up (JIT, pool connections) before either is measured.
  if (warmup > 0) {
    await autocannon({ ...c.options(platform.origin), connections, duration: warmup });
    await autocannon({ ...c.options(baseline.origin), connections, duration: warmup });
  }
  const ours = await autocannon({ ...c.options(platform.origin), connections, duration: seconds });
  const theirs = await autocannon({ ...c.options(baseline.origin), connections, duration: seconds });
  const ratio = ours.requests.average / Math.max(1, theirs.requests.average);
  console.log(`| ${c.name} | platform | ${Math.round(ours.requests.average)} | ${ours.latency.p50} | ${ours.latency.p99} | ${ours.non2xx} | ${ratio.toFixed(2)}× |`);
  console.log(`| ${c.name} | Fastify baseline | ${Math.round(theirs.requests.average)} | ${theirs.latency.p50} | ${theirs.latency.p99} | ${theirs.non2xx} | |`);
}

await baseline.app.close();
await platform.close();
await rm(dataDir, { recursive: true, force: true });
