import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { sql } from 'slonik';
import { startPlatform, type RunningPlatform } from '../api/platform.js';
import { claimDueLeads, lockRunningCampaign, refillPace, settleEndedLeads, spendPace } from '../runtime/campaigns/dialling.js';
import { loadConfig, type Config } from '../runtime/config.js';
import { createLogger } from '../runtime/logger.js';
import { isoTimestamp } from '../runtime/time.js';

/**
 * Campaigns at scale, on the server's own database:
 * 1. upload: `leads` leads as one CSV file (a phone number and two variables a row) through
 *    `POST /user/campaigns/{id}/leads`, its time and the server's resident memory above what it
 *    held before (sampled every 5 ms while the upload runs; server and client share the process,
 *    the file is built before the baseline is taken);
 * 2. claims: the dialler's claim transaction (the campaign's lock and facts, the owner's pace,
 *    up to `batch` due leads `FOR UPDATE SKIP LOCKED`, the pace spent), repeated until every lead
 *    is claimed: by one claimer on one campaign, then by `claimers` claimers at once on as many
 *    campaigns; leads claimed per second and ms of database work per claimed lead;
 * 3. settling: every claimed lead given an ended call, then the dialler's outcome statement, in
 *    leads settled per second.
 * The dialler of the server itself does not tick during the run (its period is an hour), so the
 * figures are the statements' alone, without calls being placed.
 * Usage: `npm run bench:campaigns [-- leads [batch [claimers]]]` (default 100,000 100 4).
 */

export interface CampaignsOptions {
  readonly leads: number;
  /** Leads per claim (a campaign's free lines: `max_concurrent_calls` is at most 100). */
  readonly batch: number;
  /** Claimers at once in the second claim run, each on a campaign of its own. */
  readonly claimers: number;
  /** An existing database (tests); otherwise the embedded one in a throw-away DATA_DIR. */
  readonly config?: Partial<Config>;
}

export interface CampaignsResult {
  readonly upload: { readonly leads: number; readonly seconds: number; readonly megabytes: number; readonly rssAddedMb: number; readonly invalid: number };
  readonly claims: ReadonlyArray<{ readonly claimers: number; readonly leads: number; readonly seconds: number; readonly perSecond: number; readonly msPerLead: number }>;
  readonly settle: { readonly leads: number; readonly seconds: number; readonly perSecond: number };
}

const ADMIN_TOKEN = 'bench-admin-token-0123456789';

export async function runCampaignsBench(options: CampaignsOptions): Promise<CampaignsResult> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-bench-campaigns-'));
  // The dialler stays still (an hour between ticks): the statements are measured alone.
  const config = loadConfig(process.env, { port: 0, dataDir, logLevel: 'silent', adminToken: ADMIN_TOKEN, campaigns: { callsPerSecond: 1_000_000, tickMs: 3_600_000, leaseMs: 3_600_000 }, ...options.config });
  let platform: RunningPlatform | undefined;
  try {
    platform = await startPlatform(config, createLogger('silent'));
    const origin = `${platform.origin}/api`;
    const call = async (method: string, path: string, body?: unknown, token?: string, form?: FormData) => {
      const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
      if (!form) headers['content-type'] = 'application/json';
      const response = await fetch(`${origin}${path}`, { method, headers, body: form ?? (body === undefined ? undefined : JSON.stringify(body)) });
      const answer = (await response.json()) as any;
      if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(answer)}`);
      return answer;
    };
    const user = await call('POST', '/auth/register', { name: 'Bench', email: `bench-${Date.now()}@example.com`, password: 'bench password' });
    const token: string = user.token;
    await call('POST', `/admin/users/${user.user.id}/balance`, { amount: 1_000_000, reason: 'bench' }, ADMIN_TOKEN);
    const offers = await call('GET', '/user/phone-numbers/search?country_code=US', undefined, token);
    await call('POST', '/user/phone-numbers/purchase', { phone_number: offers.data[0].phone_number }, token);
    const numbers = await call('GET', '/user/phone-numbers/all', undefined, token);
    const assistant = await call('POST', '/user/assistant', { name: 'Bench', voice_id: 1, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hello {{name}}.', system_prompt: 'Help', llm_model_id: 1, phone_number_id: numbers.data[0].id }, token);
    const always = { timezone: 'UTC', days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], start_time: '00:00', end_time: '23:59' };
    const campaign = async (name: string) => (await call('POST', '/user/campaigns', { name, assistant_id: assistant.data.id, schedule: always, max_concurrent_calls: 100 }, token)).data.id as number;

    // 1. The upload.
    const rows = ['phone_number,name,company'];
    for (let i = 0; i < options.leads; i++) rows.push(`+1415${String(2_000_000 + i).padStart(7, '0')},Customer ${i},"Acme, Inc."`);
    const csv = Buffer.from(`${rows.join('\n')}\n`);
    rows.length = 0;
    const first = await campaign('Bench upload');
    const form = new FormData();
    form.append('file', new Blob([csv], { type: 'text/csv' }), 'leads.csv');
    global.gc?.();
    const rssBefore = process.memoryUsage.rss();
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage.rss())), 5);
    const uploadStarted = performance.now();
    const added = await call('POST', `/user/campaigns/${first}/leads`, undefined, token, form);
    const uploadSeconds = (performance.now() - uploadStarted) / 1000;
    clearInterval(sampler);
    if (added.data.added !== options.leads) throw new Error(`uploaded ${added.data.added} of ${options.leads} leads`);
    const upload = { leads: added.data.added as number, seconds: uploadSeconds, megabytes: csv.length / 1e6, rssAddedMb: (rssPeak - rssBefore) / 1e6, invalid: (added.data.invalid as unknown[]).length };

    // 2. Claims, as the dialler makes them.
    const { pool } = platform.runtime;
    const userId: number = user.user.id;
    const claimAll = async (campaignId: number): Promise<number> => {
      let claimed = 0;
      for (;;) {
        const now = Date.now();
        const leads = await pool.transaction(async (tx) => {
          const facts = await lockRunningCampaign(tx, campaignId);
          if (!facts) throw new Error(`campaign ${campaignId} is not running`);
          await refillPace(tx, userId, 1_000_000, isoTimestamp(now));
          const taken = await claimDueLeads(tx, { campaignId, limit: options.batch, holder: 'bench', now: isoTimestamp(now), leaseUntil: isoTimestamp(now + 3_600_000) });
          await spendPace(tx, userId, taken.length);
          return taken.length;
        });
        if (leads === 0) return claimed;
        claimed += leads;
      }
    };
    const claimRun = async (campaignIds: readonly number[]) => {
      const started = performance.now();
      const counts = await Promise.all(campaignIds.map(claimAll));
      const seconds = (performance.now() - started) / 1000;
      const leads = counts.reduce((sum, n) => sum + n, 0);
      return { claimers: campaignIds.length, leads, seconds, perSecond: leads / seconds, msPerLead: (seconds * 1000 * campaignIds.length) / leads };
    };
    await call('POST', `/user/campaigns/${first}/start`, undefined, token);
    const claims = [await claimRun([first])];
    // The same leads again, spread over `claimers` campaigns, each claimed by its own claimer at once.
    const others: number[] = [];
    for (let i = 0; i < options.claimers; i++) others.push(await campaign(`Bench claimer ${i + 1}`));
    await pool.query(sql.unsafe`
      UPDATE campaign_leads SET campaign_id = (${sql.array(others, 'int8')})[1 + (id % ${options.claimers})], status = 'pending', attempts = 0, lease_holder = NULL, lease_until = NULL
      WHERE campaign_id = ${first}`);
    for (const id of others) await call('POST', `/user/campaigns/${id}/start`, undefined, token);
    claims.push(await claimRun(others));

    // 3. Settling: each claimed lead's attempt ended (a call row per lead, written in one statement).
    await pool.query(sql.unsafe`
      INSERT INTO calls (user_id, assistant_id, assistant_name, campaign_id, campaign_lead_id, campaign_attempt, type, mode, status, client_phone_number, ended_at)
      SELECT l.user_id, ${assistant.data.id}, 'Bench', l.campaign_id, l.id, l.attempts, 'outbound', 'pipeline', CASE WHEN l.id % 3 = 0 THEN 'busy' ELSE 'completed' END, l.phone_number, now()
      FROM campaign_leads l WHERE l.user_id = ${userId} AND l.status = 'calling'`);
    const settleStarted = performance.now();
    const settled = await settleEndedLeads(pool, isoTimestamp(Date.now()));
    const settleSeconds = (performance.now() - settleStarted) / 1000;
    return { upload, claims, settle: { leads: settled, seconds: settleSeconds, perSecond: settled / settleSeconds } };
  } finally {
    await platform?.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

export function formatCampaigns(result: CampaignsResult): string {
  const { upload, settle } = result;
  const lines = [
    `Upload: ${upload.leads.toLocaleString('en-US')} leads (${upload.megabytes.toFixed(1)} MB of CSV, ${upload.invalid} invalid) in ${upload.seconds.toFixed(2)} s, ${Math.round(upload.leads / upload.seconds).toLocaleString('en-US')} leads/s; the server's RSS rose by ${upload.rssAddedMb.toFixed(0)} MB at most`,
    '',
    '| claimers at once | leads claimed | seconds | leads claimed per second | ms of claim per lead (per claimer) |',
    '|---|---|---|---|---|',
    ...result.claims.map((c) => `| ${c.claimers} | ${c.leads} | ${c.seconds.toFixed(2)} | ${Math.round(c.perSecond)} | ${c.msPerLead.toFixed(3)} |`),
    '',
    `Settling: ${settle.leads.toLocaleString('en-US')} ended attempts in one statement, ${settle.seconds.toFixed(2)} s, ${Math.round(settle.perSecond).toLocaleString('en-US')} leads/s`,
  ];
  return lines.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [leads = 100_000, batch = 100, claimers = 4] = process.argv.slice(2).map(Number);
  const result = await runCampaignsBench({ leads, batch, claimers });
  console.log(formatCampaigns(result));
}
