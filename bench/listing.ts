import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { startPlatform, type RunningPlatform } from '../api/platform.js';
import { loadConfig, type Config } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';

/**
 * Call listing at scale: seeds `calls` calls spread over `users` users (one of them the bench
 * user, with calls/users of them), then measures p50/p99 of `GET /api/user/calls` page 1 with each
 * filter of spec 4.7, page 1,000 (or the last page), and a transcript search with its cursor page.
 * Usage: `npm run bench:listing [-- calls users requests]` (default 1,000,000 1,000 200).
 */

export interface ListingOptions {
  readonly calls: number;
  readonly users: number;
  /** Requests per case, sent one after another. */
  readonly requests: number;
  /** An existing database (tests); otherwise the embedded one in a throw-away DATA_DIR. */
  readonly config?: Partial<Config>;
}

export interface ListingResult {
  readonly seeded: number;
  readonly seedSeconds: number;
  readonly cases: Array<{ name: string; p50: number; p99: number; total: number }>;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

export async function runListingBench(options: ListingOptions): Promise<ListingResult> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-listing-'));
  const config = loadConfig(process.env, { port: 0, dataDir, logLevel: 'silent', ...options.config });
  let platform: RunningPlatform | undefined;
  try {
    platform = await startPlatform(config, createLogger('silent'));
    const origin = platform.origin;
    const post = async (path: string, body: unknown, token?: string) => {
      const response = await fetch(`${origin}/api${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
      return (await response.json()) as any;
    };
    const user = await post('/auth/register', { name: 'Bench', email: `bench-${Date.now()}@example.com`, password: 'bench password' });
    const token: string = user.token;
    const userId: number = user.user.id;
    const assistant = await post('/user/assistant', { name: 'Bench', voice_id: 1, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hi', system_prompt: 'Help', llm_model_id: 1 }, token);
    const assistantId: number = assistant.data.id;

    const client = new pg.Client({ connectionString: platform.runtime.databaseUrl });
    await client.connect();
    const started = performance.now();
    let campaignId: number;
    try {
      campaignId = Number((await client.query(`INSERT INTO campaigns (user_id, name) VALUES ($1, 'Bench campaign') RETURNING id`, [userId])).rows[0].id);
      await client.query(`
        INSERT INTO users (name, email, password_hash)
        SELECT 'Seed ' || i, 'seed-' || i || '-' || $1 || '@example.com', 'x' FROM generate_series(1, $2::int - 1) AS i`, [Date.now(), options.users]);
      const words = ['refund', 'order', 'delivery', 'invoice', 'appointment', 'password', 'upgrade', 'cancel', 'address', 'warranty'];
      const statuses = ['completed', 'ended_by_customer', 'ended_by_assistant', 'no-answer', 'busy', 'failed', 'ended'];
      const batch = 100_000;
      for (let offset = 0; offset < options.calls; offset += batch) {
        const size = Math.min(batch, options.calls - offset);
        await client.query(
          `INSERT INTO calls (user_id, assistant_id, assistant_name, campaign_id, type, mode, status, duration, assistant_phone_number, client_phone_number, transcript, created_at, ended_at)
           SELECT CASE WHEN n % $3::int = 0 THEN $4::bigint ELSE (SELECT min(id) FROM users) + (n % $5::int) END,
             CASE WHEN n % $3::int = 0 THEN $6::bigint ELSE NULL END, 'Bench',
             CASE WHEN n % $3::int = 0 AND n % 7 = 0 THEN $7::bigint ELSE NULL END,
             (ARRAY['inbound','outbound','web'])[1 + n % 3], 'pipeline', ($8::text[])[1 + n % 7], n % 600,
             '+14155550100', '+1415555' || lpad((n % 10000)::text, 4, '0'),
             'assistant: Hello, how can I help?' || chr(10) || 'user: I have a question about my ' || ($9::text[])[1 + n % 10] || ' number ' || n,
             now() - make_interval(secs => n * 31.0), now() - make_interval(secs => n * 31.0 - 60)
           FROM generate_series($1::int, $2::int) AS n`,
          [offset + 1, offset + size, options.users, userId, options.users, assistantId, campaignId, statuses, words],
        );
      }
      await client.query('ANALYZE calls');
    } finally {
      await client.end();
    }
    const seedSeconds = (performance.now() - started) / 1000;

    const get = async (query: string) => {
      const response = await fetch(`${origin}/api/user/calls?${query}`, { headers: { authorization: `Bearer ${token}` } });
      if (response.status !== 200) throw new Error(`GET /user/calls?${query}: ${response.status} ${await response.text()}`);
      return (await response.json()) as { total: number; last_page: number; next_search_after?: string };
    };
    const first = await get('');
    const lastPage = Math.min(1_000, first.last_page);
    const search = await get('search=refund');
    const today = new Date().toISOString().slice(0, 10);
    const monthAgo = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10);
    const cases: Array<[string, string]> = [
      ['page 1', ''],
      ['status=completed', 'status=completed'],
      ['type=inbound', 'type=inbound'],
      ['phone_number', 'phone_number=%2B14155551000'],
      ['assistant_id', `assistant_id=${assistantId}`],
      ['campaign_id', `campaign_id=${campaignId}`],
      ['date range (30 days)', `date_from=${monthAgo}&date_to=${today}`],
      [`page ${lastPage}`, `page=${lastPage}`],
      ['search=refund', 'search=refund'],
      ['search=refund, next cursor', `search=refund&search_after=${search.next_search_after ?? ''}`],
      ['search + status filter', 'search=refund%20number&status=completed'],
    ];
    const results: ListingResult['cases'] = [];
    for (const [name, query] of cases) {
      const times: number[] = [];
      let total = 0;
      for (let i = 0; i < options.requests; i++) {
        const t0 = performance.now();
        total = (await get(query)).total;
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      results.push({ name, p50: percentile(times, 50), p99: percentile(times, 99), total });
    }
    return { seeded: options.calls, seedSeconds, cases: results };
  } finally {
    await platform?.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

export function formatListing(result: ListingResult): string {
  const lines = [`Call listing with ${result.seeded.toLocaleString('en-US')} calls seeded (${result.seedSeconds.toFixed(1)} s)`, '', '| case | p50 ms | p99 ms | matching calls |', '|---|---|---|---|'];
  for (const c of result.cases) lines.push(`| ${c.name} | ${c.p50.toFixed(1)} | ${c.p99.toFixed(1)} | ${c.total} |`);
  return lines.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [calls = 1_000_000, users = 1_000, requests = 200] = process.argv.slice(2).map(Number);
  console.log(formatListing(await runListingBench({ calls, users, requests })));
}
