/**
 * Campaigns dialled by several processes on one database:
 * 1. two platforms on one database and one clock, their diallers ticking together: never more than
 *    `max_concurrent_calls` live calls of the campaign between them, no lead dialled twice at once,
 *    one call per attempt, and every lead settled.
 * 2. a lead claimed by a process that stopped before its call existed waits out its lease (counted
 *    as a line meanwhile), then goes back as it was, its attempt not counted, and is dialled once; a
 *    call for an attempt whose claim lapsed is refused and not placed.
 * 3. a server process killed (SIGKILL) mid-campaign, with live calls, loses nothing: another server settles its live
 *    calls (orphan sweep) and their leads, takes back the lead it had claimed once the lease runs
 *    out, and finishes the campaign; no attempt dialled twice.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLoopbackCarrier, type LoopbackDial } from '../runtime/calls/carriers/loopback.js';
import { PlatformError } from '../runtime/errors.js';
import { ALWAYS, campaignCalls, campaignOf, campaignRig, carrierSays, DIALLER, insertCampaign, insertLeads, leadsOf, sqlOn } from './helpers/campaigns.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { startTestPlatform, type TestPlatform } from './helpers/platform.js';
import { startServer, until, type RunningServer } from './helpers/server_process.js';

const phones = (n: number) => Array.from({ length: n }, (_, i) => ({ phone: `+1415555${String(1000 + i).padStart(4, '0')}` }));

t.test('two processes never exceed max_concurrent_calls together, nor dial a lead twice', async (t) => {
  const a = await campaignRig(t, { campaigns: { callsPerSecond: 100 } });
  const bDials: LoopbackDial[] = [];
  const b: TestPlatform = await startTestPlatform(
    t,
    { databaseUrl: a.api.databaseUrl, acceptUnsignedCarrierWebhooks: true, campaigns: { ...DIALLER, callsPerSecond: 100 } },
    { clock: a.clock, carrier: createLoopbackCarrier((call) => bDials.push(call)) },
  );
  const id = await insertCampaign(a, { maxConcurrentCalls: 4, maxAttempts: 2, retryIntervalMinutes: 1 });
  await insertLeads(a, id, phones(12), a.clock.now());
  const ended = new Set<number>();
  let peak = 0;
  for (let round = 0; round < 60; round++) {
    await a.tick();
    const calls = await campaignCalls(a.api.databaseUrl, id);
    const live = calls.filter((call) => call.live);
    peak = Math.max(peak, live.length);
    if (live.length > 4) t.fail(`round ${round}: ${live.length} live calls`);
    if (new Set(live.map((call) => call.lead)).size !== live.length) t.fail(`round ${round}: a lead dialled twice at once`);
    const calling = (await leadsOf(a.api.databaseUrl, id)).filter((lead) => lead.status === 'calling').length;
    if (calling > 4) t.fail(`round ${round}: ${calling} leads calling`);
    if ((await campaignOf(a.api.databaseUrl, id)).status === 'completed') break;
    // Each live call ends, busy or answered and ended, through the process that placed it.
    for (const [api, dials] of [[a.api, a.dials], [b, bDials]] as const) {
      for (const dial of dials) {
        if (ended.has(dial.callId)) continue;
        ended.add(dial.callId);
        await carrierSays(api, dial, dial.callId % 3 === 0 ? 'busy' : 'completed');
      }
    }
    await a.tick(30_000);
  }
  t.equal(peak, 4, 'the lines were all used');
  t.equal((await campaignOf(a.api.databaseUrl, id)).status, 'completed', 'every lead settled');
  const calls = await campaignCalls(a.api.databaseUrl, id);
  t.equal(calls.length, a.dials.length + bDials.length, 'a call row for each call placed');
  const attempts = new Set(calls.map((call) => `${call.lead}/${call.attempt}`));
  t.equal(attempts.size, calls.length, 'one call per attempt');
  const leads = await leadsOf(a.api.databaseUrl, id);
  for (const lead of leads) {
    const own = calls.filter((call) => call.lead === lead.id).map((call) => call.attempt);
    if (own.join() !== Array.from({ length: lead.attempts }, (_, i) => i + 1).join()) t.fail(`lead ${lead.id}: attempts ${own.join()} of ${lead.attempts}`);
  }
  t.comment(`calls placed: ${a.dials.length} by one process, ${bDials.length} by the other`);
});

t.test("a claim whose process stopped before its call existed goes back after its lease, once", async (t) => {
  const rig = await campaignRig(t, { campaigns: { leaseMs: 30_000 } });
  const id = await insertCampaign(rig, { maxConcurrentCalls: 1 });
  const [lead] = await insertLeads(rig, id, phones(2), rig.clock.now());
  // As a process leaves it when it stops between its claim and its call.
  await sqlOn(rig.api.databaseUrl, `UPDATE campaign_leads SET status = 'calling', attempts = 1, lease_holder = 'a-stopped-process', lease_until = $2 WHERE id = $1`, [lead, new Date(rig.clock.now() + 30_000).toISOString()]);
  await rig.tick();
  await rig.tick();
  t.equal(rig.dials.length, 0, 'the claimed lead takes the one line while its lease holds');
  await rig.tick(25_000);
  t.equal(rig.dials.length, 0, 'nor a little before its lease runs out');
  await rig.tick(5_000);
  await rig.tick();
  t.same(rig.dials.map((dial) => dial.to), [phones(2)[0]!.phone], 'dialled once, as its first attempt');
  t.same((await campaignCalls(rig.api.databaseUrl, id)).map((call) => [call.lead, call.attempt]), [[lead, 1]]);

  // A call for an attempt whose claim is no longer the caller's is refused, and nothing is placed.
  const voice = rig.api.platform.runtime.services.voice;
  const second = (await leadsOf(rig.api.databaseUrl, id))[1]!;
  const refused = await voice
    .place(rig.userId, { assistantId: rig.assistantId, phoneNumber: second.phone_number, variables: {}, campaign: { campaignId: id, leadId: second.id, attempt: 1, holder: 'a-stopped-process' } })
    .then(() => undefined, (error: unknown) => error);
  t.ok(refused instanceof PlatformError && refused.code === 'campaign_attempt_taken', 'refused: the claim is not the caller’s');
  t.equal((await campaignCalls(rig.api.databaseUrl, id)).length, 1, 'no call row written');
  t.equal(rig.dials.length, 1, 'nothing placed');
});

const ADMIN = 'admin-token-0123456789';

async function dataDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ap-campaign-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A funded owner with an outbound assistant on a number, through `server`'s API. */
async function outboundOwner(server: RunningServer): Promise<{ token: string; userId: number; assistantId: number }> {
  const registered = await server.api('POST', '/auth/register', { name: 'Ada', email: `ada${Date.now()}@example.com`, password: 'a long password' });
  const token = registered.body.token as string;
  const userId = registered.body.user.id as number;
  await server.api('POST', `/admin/users/${userId}/balance`, { amount: 50, reason: 'test' }, ADMIN);
  const offer = (await server.api('GET', '/user/phone-numbers/search?country_code=US', undefined, token)).body.data[0];
  await server.api('POST', '/user/phone-numbers/purchase', { phone_number: offer.phone_number }, token);
  const number = (await server.api('GET', '/user/phone-numbers/all', undefined, token)).body.data[0];
  const created = await server.api('POST', '/user/assistant', { name: 'Out', voice_id: 1, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hello.', system_prompt: 'Help', llm_model_id: 6, phone_number_id: number.id }, token);
  return { token, userId, assistantId: created.body.data.id as number };
}

t.test('a server killed mid-campaign loses nothing; no attempt is dialled twice', async (t) => {
  const databaseUrl = await freshDatabase();
  const env = { DATABASE_URL: databaseUrl, ADMIN_TOKEN: ADMIN, CALL_HEARTBEAT_MS: '200', CALL_ORPHAN_AFTER_MS: '1500', CALL_SWEEP_MS: '250', CAMPAIGN_TICK_MS: '200', CAMPAIGN_LEASE_MS: '2000' };
  const doomed = await startServer(t, { dataDir: await dataDir(t), env });
  const owner = await outboundOwner(doomed);
  // The campaign starts before the survivor does: the doomed server dials its first calls alone.
  // Running once its leads are in: a running campaign with no lead left is completed at the next tick.
  const id = await insertCampaign({ api: { databaseUrl } as TestPlatform, userId: owner.userId, assistantId: owner.assistantId }, { maxConcurrentCalls: 3, schedule: ALWAYS, status: 'draft' });
  await insertLeads({ api: { databaseUrl } as TestPlatform, userId: owner.userId }, id, phones(10), Date.now() - 1_000);
  await sqlOn(databaseUrl, `UPDATE campaigns SET status = 'running' WHERE id = $1`, [id]);
  const live = async () => withClient(databaseUrl, async (db) => Number((await db.query(`SELECT count(*) AS n FROM calls WHERE campaign_id = $1 AND status = 'in-progress'`, [id])).rows[0].n));
  await until('calls answered on the doomed server', async () => ((await live()) > 0 ? true : undefined), 120_000).catch(async (error: unknown) => {
    t.comment(JSON.stringify({ leads: await leadsOf(databaseUrl, id), calls: await campaignCalls(databaseUrl, id), campaign: await campaignOf(databaseUrl, id), log: doomed.log.filter((line) => line.level >= 40) }));
    throw error;
  });
  const survivor = await startServer(t, { dataDir: await dataDir(t), env });
  // And the lead it had just claimed when it died (claimed, its call not yet written).
  const claimed = await withClient(databaseUrl, async (db) =>
    Number(
      (
        await db.query(
          `UPDATE campaign_leads SET status = 'calling', attempts = attempts + 1, lease_holder = 'the-doomed-server', lease_until = now() + interval '2 seconds'
           WHERE id = (SELECT id FROM campaign_leads WHERE campaign_id = $1 AND status = 'pending' ORDER BY id DESC LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id`,
          [id],
        )
      ).rows[0].id,
    ),
  );
  const lastBeforeKill = await withClient(databaseUrl, async (db) => Number((await db.query(`SELECT coalesce(max(id), 0) AS id FROM calls`)).rows[0].id));
  process.kill(doomed.pid, 'SIGKILL');
  await doomed.exited;

  // The survivor's calls are ended by their owner as they are answered, so the campaign moves on
  // (the killed server's are left to the survivor's sweep).
  const hungUp = new Set<number>();
  await until(
    'the campaign to complete on the survivor',
    async () => {
      const rows = await withClient(databaseUrl, async (db) => (await db.query(`SELECT id FROM calls WHERE campaign_id = $1 AND status = 'in-progress' AND id > $2`, [id, lastBeforeKill])).rows);
      for (const row of rows) {
        const callId = Number(row.id);
        if (hungUp.has(callId)) continue;
        const answer = await survivor.api('POST', `/user/calls/${callId}/hangup`, undefined, owner.token);
        if (answer.status === 200) hungUp.add(callId);
      }
      return (await campaignOf(databaseUrl, id)).status === 'completed' ? true : undefined;
    },
    120_000,
  );
  const leads = await leadsOf(databaseUrl, id);
  const calls = await campaignCalls(databaseUrl, id);
  t.same(leads.filter((lead) => ['pending', 'retrying', 'calling'].includes(lead.status)), [], 'every lead settled (the killed server’s calls ended by the sweep)');
  t.ok(leads.filter((lead) => lead.status === 'completed').length >= leads.length - 1, `answered calls complete their leads: ${leads.map((lead) => lead.status).join(', ')}`);
  t.equal(new Set(calls.map((call) => `${call.lead}/${call.attempt}`)).size, calls.length, 'one call per attempt');
  for (const lead of leads) t.equal(calls.filter((call) => call.lead === lead.id).length, lead.attempts, `lead ${lead.id}: ${lead.attempts} attempt(s), as many calls`);
  const taken = leads.find((lead) => lead.id === claimed)!;
  t.equal(taken.attempts, 1, 'the lead claimed by the killed server was dialled once, its lapsed claim not counted');
  t.ok(survivor.log.some((line) => line.msg === 'campaign leads whose claim lapsed before their call went back'), 'the survivor took the lapsed claim back');
  survivor.child.kill('SIGTERM');
  await survivor.exited;
});
