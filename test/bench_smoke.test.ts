/**
 * Every benchmark, run for a moment at tiny sizes, so the benchmark code cannot rot: the call
 * listing (seed, filters, search, cursor), concurrent calls (phones process, loopback carrier,
 * measurements), text chat (messages and idle widget sockets), campaigns (upload, claims, settling),
 * WhatsApp channel messages (intake, replies in order, duplicates) and the extraction script. The REST
 * script has a file of its own (bench_rest_smoke).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { formatCalls, histogramQuantile, largestWithinBound, runCallsBench } from '../bench/calls.js';
import { formatCampaigns, runCampaignsBench } from '../bench/campaigns.js';
import { formatChannels, runChannelsBench } from '../bench/channels.js';
import { formatChat, runChatBench } from '../bench/chat.js';
import { formatListing, runListingBench } from '../bench/listing.js';
import { freshDatabase } from './helpers/database.js';

t.test('listing benchmark', async (t) => {
  const result = await runListingBench({ calls: 3_000, users: 10, requests: 2, config: { databaseUrl: await freshDatabase() } });
  t.equal(result.seeded, 3_000);
  t.equal(result.cases.length, 11);
  t.equal(result.cases[0]!.total, 300, 'the bench user has calls/users of them');
  t.ok(result.cases.every((c) => c.p50 > 0 && c.p99 >= c.p50));
  t.ok(result.cases.find((c) => c.name === 'search=refund')!.total > 0, 'search finds transcripts');
  t.match(formatListing(result), /\| page 1 \| [\d.]+ \| [\d.]+ \| 300 \|/);
});

t.test('calls benchmark', async (t) => {
  // Two server processes on one port: every call's stream reaches the process that placed it.
  const steps = await runCallsBench({ steps: [4], seconds: 2, workers: 2, env: { DATABASE_URL: await freshDatabase() } });
  t.equal(steps.length, 1);
  t.match(steps[0], { calls: 4, workers: 2 });
  t.ok(steps[0]!.cpuPerCallPercent > 0, 'server CPU measured');
  t.ok(steps[0]!.phonesCpuPercent > 0, "the phones' CPU measured");
  t.ok(steps[0]!.loopLagP99Ms > 0, 'event-loop lag measured');
  t.ok(steps[0]!.turns > 0 && steps[0]!.latenessP99Ms >= 0, 'every call heard, the server processes measured');
  t.match(formatCalls(steps, false), /\| 4 \| 2 \| [\d.]+ \|/);
  t.match(formatCalls(steps, false), /WORKERS=2: /);
  const before = new Map([[1, 0], [5, 0], [Infinity, 0]]);
  const after = new Map([[1, 50], [5, 100], [Infinity, 100]]);
  t.equal(histogramQuantile(before, after, 0.5), 1, 'the median at the top of the first bucket');
  t.equal(histogramQuantile(before, after, 0.75), 3, 'interpolated within the second bucket');
  t.ok(Number.isNaN(histogramQuantile(after, after, 0.5)), 'nothing observed between the readings');
  const step = (calls: number, jitterP99Ms: number, latenessP99Ms = 5) => ({ ...steps[0]!, calls, jitterP99Ms, latenessP99Ms });
  t.equal(largestWithinBound([step(50, 5), step(100, 19.9), step(200, 20), step(400, 12)]), 100, 'the largest N before the first step at the bound');
  t.equal(largestWithinBound([step(50, 5), step(100, 6, 20.5)]), 50, 'frames late at the server count as jitter too');
  t.equal(largestWithinBound([step(50, 21)]), undefined);
  t.match(formatCalls([step(50, 5), step(100, 6)], false), /jitter under 20 ms at the phones and at the server: WORKERS=2: 100 \(the largest step tried\)/);
  t.match(formatCalls([step(50, 5), step(100, 26)], false), /jitter under 20 ms at the phones and at the server: WORKERS=2: 50$/);
});

t.test('chat benchmark', async (t) => {
  // More than one conversation admits (16): they are spread as a visitor's tabs would be. Bounded
  // by count, not time: under a loaded suite one second may end before the first answer.
  const result = await runChatBench({ seconds: 1, sockets: 40, messages: 60, config: { databaseUrl: await freshDatabase() } });
  t.equal(result.messages, 60, 'every message answered');
  t.equal(result.errors, 0);
  t.equal(result.sockets, 40, 'every idle widget socket open');
  t.ok(result.p99 >= result.p50);
  t.match(formatChat(result), /^\| \d+ \| [\d.]+ \| [\d.]+ \| 0 \| 40 \| -?[\d.]+ \+ -?[\d.]+ = -?[\d.]+ \|$/m);
});

t.test('extraction benchmark script', async (t) => {
  const env = { ...process.env, DATABASE_URL: await freshDatabase(), LOG_LEVEL: 'silent' };
  const extract = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'bench/extract.ts', '2', '1'], { env, timeout: 60_000 });
  t.match(extract.stdout, /pages\/s/);
});

t.test('campaigns benchmark', async (t) => {
  const result = await runCampaignsBench({ leads: 300, batch: 100, claimers: 2, config: { databaseUrl: await freshDatabase() } });
  t.match(result.upload, { leads: 300, invalid: 0 }, 'every lead uploaded');
  t.same(result.claims.map((c) => [c.claimers, c.leads]), [[1, 300], [2, 300]], 'every lead claimed once by one claimer, then by two at once');
  t.equal(result.settle.leads, 300, 'every claimed lead settled');
  t.match(formatCampaigns(result), /\| 2 \| 300 \| [\d.]+ \| \d+ \| [\d.]+ \|/);
});

t.test('channels benchmark', async (t) => {
  // The bench itself throws when a customer's replies are missing, repeated or out of order.
  const result = await runChannelsBench({ customers: 8, messages: 2, config: { databaseUrl: await freshDatabase() } });
  t.equal(result.endToEnd.replies, 16, 'one reply per message');
  t.match(result.duplicates, { posted: 16, acknowledged: 16, answeredAgain: 0 }, 'every duplicate acknowledged, none answered again');
  t.ok(result.intake.p99 >= result.intake.p50 && result.intake.p50 > 0);
  t.ok(result.eventLoop.maxMs > 0, 'event-loop delay measured');
  t.match(formatChannels(result), /\| intake: notifications acknowledged \| 16 \| [\d.]+ \| \d+ \| [\d.]+ \/ [\d.]+ \/ [\d.]+ \|/);
});
