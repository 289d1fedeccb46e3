/**
 * The campaigns' dialler on one process, its clock scripted (Tuesday 2026-11-24 10:00 UTC on), the
 * campaigns and leads written as the API writes them, the carrier's answers sent as its callbacks:
 * 1. it dials only inside the window (`outside_window` before and after it); a call live at the
 *    window's end goes on; leads due meanwhile wait for the next window, oldest due first.
 * 2. never more than `max_concurrent_calls` live calls; a line freed is taken by the next lead.
 * 3. the owner's pace: no more than CAMPAIGN_CALLS_PER_SECOND calls started a second, across
 *    every campaign of the owner.
 * 4. retries and outcomes: busy and no-answer tried again after the interval (not before) until
 *    `max_attempts`, then final; a carrier's refusal fails the lead (not in `retry_on`); an ended
 *    call completes it; an answering machine is `voicemail`; the campaign completes when no lead is left.
 * 5. a number on the do-not-call list is never dialled (its lead becomes `do-not-call`).
 * 6. a balance that cannot pay for a minute stops the dialling (`insufficient_balance`, the
 *    campaign still running); a top-up through the admin API resumes it.
 * 7. pause stops new dials at once while live calls go on to their end; resume dials again.
 * 8. cancel: a live call's lead that would be retried is `cancelled`; one that completes is `completed`.
 * 9. a campaign's call is the assistant's ordinary outbound call: the lead's variables over the
 *    campaign's over the assistant's, rendered in the greeting; listed by
 *    `GET /user/calls?campaign_id=` with its campaign's name.
 * 10. end to end over HTTP on the real clock: a campaign created, filled and started through the
 *    API is dialled; the loopback callee's busy (0001) and failing (0003) numbers and one that
 *    answers (hung up by its owner) give the leads busy, failed and completed; the campaign completes.
 */
import t from 'tap';
import { ADMIN_TOKEN, startTestPlatform } from './helpers/platform.js';
import { until } from './helpers/server_process.js';
import { campaignCalls, campaignOf, campaignRig, carrierSays, insertCampaign, insertLeads, leadsOf, sqlOn, type CampaignRig } from './helpers/campaigns.js';

const phones = (n: number, from = 100) => Array.from({ length: n }, (_, i) => ({ phone: `+1415555${String(from + i).padStart(4, '0')}` }));
/** The `nth` call placed to `phone` (the calls of one tick are placed together, in no set order). */
const dialTo = (rig: CampaignRig, phone: string, nth = 0) => rig.dials.filter((dial) => dial.to === phone)[nth]!;
const live = async (rig: CampaignRig, campaignId: number) => (await campaignCalls(rig.api.databaseUrl, campaignId)).filter((call) => call.live).length;

/** Moves the clock to `iso` (it only goes forward), then runs one tick there. */
async function tickAt(rig: CampaignRig, iso: string): Promise<void> {
  const target = Date.parse(iso);
  if (target - 1_000 > rig.clock.now()) await rig.tick(target - 1_000 - rig.clock.now());
  await rig.tick(target - rig.clock.now());
}

t.test('dials only inside its window; a call live at its end goes on', async (t) => {
  const rig = await campaignRig(t);
  const id = await insertCampaign(rig, { schedule: { timezone: 'UTC', days: ['tue', 'wed'], start_time: '10:05', end_time: '10:06' }, maxConcurrentCalls: 1 });
  const [l1, l2, l3] = await insertLeads(rig, id, phones(3), rig.clock.now());
  await rig.tick();
  t.equal(rig.dials.length, 0, 'nothing dialled before 10:05');
  t.same(await campaignOf(rig.api.databaseUrl, id), { status: 'running', status_reason: 'outside_window' });

  await tickAt(rig, '2026-11-24T10:05:00Z');
  t.equal(rig.dials.length, 1, 'the first lead dialled at 10:05');
  t.equal((await campaignOf(rig.api.databaseUrl, id)).status_reason, null, 'dialling: no reason');
  await carrierSays(rig.api, rig.dials[0]!, 'busy');
  await tickAt(rig, '2026-11-24T10:05:30Z');
  t.equal(rig.dials.length, 2, 'its line freed, the next lead dialled');
  t.equal(rig.dials[1]!.to, phones(3)[1]!.phone);

  await tickAt(rig, '2026-11-24T10:06:00Z');
  t.equal(await live(rig, id), 1, 'the call live at the end of the window goes on');
  t.equal(rig.dials.length, 2, 'no new call at 10:06 (the end is exclusive)');
  t.equal((await campaignOf(rig.api.databaseUrl, id)).status_reason, 'outside_window');
  await carrierSays(rig.api, rig.dials[1]!, 'busy');
  await tickAt(rig, '2026-11-24T12:00:00Z');
  t.equal(rig.dials.length, 2, 'retries due at 11:05 and 11:06 wait for the window too');
  const leads = await leadsOf(rig.api.databaseUrl, id);
  t.same(leads.map((l) => [l.id, l.status, l.attempts]), [[l1, 'retrying', 1], [l2, 'retrying', 1], [l3, 'pending', 0]]);

  await tickAt(rig, '2026-11-25T10:04:59Z');
  t.equal(rig.dials.length, 2, 'Wednesday 10:04:59: not yet');
  await tickAt(rig, '2026-11-25T10:05:00Z');
  t.equal(rig.dials.length, 3, 'Wednesday 10:05: the next one');
  t.equal(rig.dials[2]!.to, phones(3)[2]!.phone, 'the lead due first (pending since Tuesday 10:00) before the retries');
});

t.test('never more than max_concurrent_calls live calls', async (t) => {
  const rig = await campaignRig(t);
  const id = await insertCampaign(rig, { maxConcurrentCalls: 3 });
  await insertLeads(rig, id, phones(6), rig.clock.now());
  for (let i = 0; i < 3; i++) await rig.tick();
  t.equal(rig.dials.length, 3, 'three lines, three calls');
  t.equal(await live(rig, id), 3);
  await carrierSays(rig.api, rig.dials[1]!, 'busy');
  await rig.tick();
  await rig.tick();
  t.equal(rig.dials.length, 4, 'one line freed, one more call');
  t.equal(await live(rig, id), 3, 'still three live');
  t.equal((await leadsOf(rig.api.databaseUrl, id)).filter((l) => l.status === 'calling').length, 3, 'three leads calling');
});

t.test("the owner's pace: at most CAMPAIGN_CALLS_PER_SECOND calls started a second, across campaigns", async (t) => {
  const rig = await campaignRig(t, { campaigns: { callsPerSecond: 4 } });
  const a = await insertCampaign(rig, { maxConcurrentCalls: 100 });
  const b = await insertCampaign(rig, { maxConcurrentCalls: 100 });
  await insertLeads(rig, a, phones(7, 100), rig.clock.now());
  await insertLeads(rig, b, phones(7, 200), rig.clock.now());
  const counts: number[] = [];
  for (let i = 0; i < 4; i++) {
    await rig.tick();
    counts.push(rig.dials.length);
  }
  t.same(counts, [4, 8, 12, 14], 'four a second (a tick a second), the two campaigns together');
  const started = new Set(rig.dials.map((dial) => dial.to));
  t.equal(started.size, 14, 'each lead once');
});

t.test('retries and final outcomes; the campaign completes', async (t) => {
  const rig = await campaignRig(t);
  const id = await insertCampaign(rig, { maxAttempts: 2, retryIntervalMinutes: 30, retryOn: ['busy', 'no-answer', 'voicemail'] });
  const [busy, answered, silent, machine] = phones(4);
  // The rig's carrier refuses numbers ending in 9999.
  const rejected = { phone: '+14155559999' };
  const ids = await insertLeads(rig, id, [busy!, rejected!, answered!, silent!, machine!], rig.clock.now());
  await rig.tick();
  t.equal(rig.dials.length, 4, 'dialled; the refused number never reached the phone');
  await carrierSays(rig.api, dialTo(rig, busy!.phone), 'busy');
  t.equal((await rig.api.request('POST', `/user/calls/${dialTo(rig, answered!.phone).callId}/hangup`, { token: rig.token })).status, 200);
  await carrierSays(rig.api, dialTo(rig, silent!.phone), 'no-answer');
  await carrierSays(rig.api, dialTo(rig, machine!.phone), 'no-answer', 'machine_end_other');
  const endedAt = rig.clock.now();
  await rig.tick();
  const status = async () => (await leadsOf(rig.api.databaseUrl, id)).map((l) => `${l.status}/${l.attempts}`);
  t.same(await status(), ['retrying/1', 'failed/1', 'completed/1', 'retrying/1', 'retrying/1'], 'busy and no-answer to retry, the refusal failed, the ended call completed');
  const retry = (await leadsOf(rig.api.databaseUrl, id))[0]!;
  t.ok(Math.abs(Date.parse(retry.next_attempt_at) - (endedAt + 30 * 60_000)) < 1_000, 'due 30 minutes after its call ended');

  await rig.tick(28 * 60_000);
  await rig.tick();
  t.equal(rig.dials.length, 4, 'not before the interval');
  await rig.tick(2 * 60_000);
  await rig.tick();
  t.equal(rig.dials.length, 7, 'the three retried after 30 minutes');
  await carrierSays(rig.api, dialTo(rig, busy!.phone, 1), 'busy');
  await carrierSays(rig.api, dialTo(rig, silent!.phone, 1), 'completed');
  await carrierSays(rig.api, dialTo(rig, machine!.phone, 1), 'no-answer', 'machine_end_beep');
  await rig.tick();
  t.same(await status(), ['busy/2', 'failed/1', 'completed/1', 'no-answer/2', 'voicemail/2'], 'at max_attempts each takes its outcome as final');
  const calls = await campaignCalls(rig.api.databaseUrl, id);
  t.same(calls.filter((c) => c.lead === ids[0]).map((c) => [c.attempt, c.status]), [[1, 'busy'], [2, 'busy']], 'one call per attempt');
  t.equal((await leadsOf(rig.api.databaseUrl, id))[0]!.last_call_id, calls.filter((c) => c.lead === ids[0]).at(-1)!.id, 'last_call_id is the last attempt');
  await rig.tick();
  t.same(await campaignOf(rig.api.databaseUrl, id), { status: 'completed', status_reason: null }, 'no lead left: completed');
});

t.test('a number on the do-not-call list is never dialled', async (t) => {
  const rig = await campaignRig(t);
  const id = await insertCampaign(rig);
  const [barred, free] = phones(2);
  await insertLeads(rig, id, [barred!, free!], rig.clock.now());
  // Added to the list after the lead was (and the API's marking of the lead missed).
  await sqlOn(rig.api.databaseUrl, 'INSERT INTO do_not_call (user_id, phone_number) VALUES ($1, $2)', [rig.userId, barred!.phone]);
  await rig.tick();
  await rig.tick();
  t.same(rig.dials.map((dial) => dial.to), [free!.phone], 'only the other number');
  t.same((await leadsOf(rig.api.databaseUrl, id)).map((l) => [l.status, l.attempts]), [['do-not-call', 0], ['calling', 1]]);
});

t.test('a balance that cannot pay for a minute stops the dialling; a top-up resumes it', async (t) => {
  const rig = await campaignRig(t);
  const id = await insertCampaign(rig);
  await insertLeads(rig, id, phones(2), rig.clock.now());
  const balance = Number((await rig.api.request('GET', '/user', { token: rig.token })).body.data.balance);
  // A minute of a pipeline call on a US number costs 0.074: leave 0.05.
  await rig.api.request('POST', `/admin/users/${rig.userId}/balance`, { token: ADMIN_TOKEN, body: { amount: Math.round((0.05 - balance) * 1e6) / 1e6, reason: 'test' } });
  await rig.tick();
  await rig.tick();
  t.equal(rig.dials.length, 0, 'nothing dialled');
  t.same(await campaignOf(rig.api.databaseUrl, id), { status: 'running', status_reason: 'insufficient_balance' }, 'still running, saying why');
  t.equal((await rig.api.request('POST', `/admin/users/${rig.userId}/balance`, { token: ADMIN_TOKEN, body: { amount: 5, reason: 'top-up' } })).status, 200);
  await rig.tick();
  t.equal(rig.dials.length, 2, 'dialling again after the top-up');
  t.same(await campaignOf(rig.api.databaseUrl, id), { status: 'running', status_reason: null });
});

t.test('pause stops new dials at once; live calls go on to their end; resume dials again', async (t) => {
  const rig = await campaignRig(t);
  const id = await insertCampaign(rig, { maxConcurrentCalls: 2 });
  const leads = phones(4);
  await insertLeads(rig, id, leads, rig.clock.now());
  await rig.tick();
  t.equal(rig.dials.length, 2);
  await sqlOn(rig.api.databaseUrl, `UPDATE campaigns SET status = 'paused' WHERE id = $1`, [id]);
  await carrierSays(rig.api, dialTo(rig, leads[0]!.phone), 'busy');
  await rig.tick();
  await rig.tick();
  t.equal(rig.dials.length, 2, 'no new dial while paused');
  t.equal(await live(rig, id), 1, 'the other live call goes on');
  t.same((await leadsOf(rig.api.databaseUrl, id)).map((l) => l.status), ['retrying', 'calling', 'pending', 'pending'], 'the ended call still settles its lead');
  await carrierSays(rig.api, dialTo(rig, leads[1]!.phone), 'completed');
  await rig.tick();
  t.same((await leadsOf(rig.api.databaseUrl, id)).map((l) => l.status), ['retrying', 'retrying', 'pending', 'pending'], 'the second ends unanswered (no-answer, to retry)');
  await sqlOn(rig.api.databaseUrl, `UPDATE campaigns SET status = 'running', status_reason = NULL WHERE id = $1`, [id]);
  await rig.tick();
  t.equal(rig.dials.length, 4, 'resumed: the two pending leads dialled');
});

t.test('cancel: a lead that would be retried is cancelled; one that completes is completed', async (t) => {
  const rig = await campaignRig(t);
  const id = await insertCampaign(rig);
  const leads = phones(3);
  await insertLeads(rig, id, leads, rig.clock.now());
  await rig.tick();
  t.equal(rig.dials.length, 3);
  // As the API cancels: the campaign, and its leads waiting to be called.
  await sqlOn(rig.api.databaseUrl, `UPDATE campaigns SET status = 'cancelled' WHERE id = $1`, [id]);
  await sqlOn(rig.api.databaseUrl, `UPDATE campaign_leads SET status = 'cancelled' WHERE campaign_id = $1 AND status IN ('pending', 'retrying')`, [id]);
  await carrierSays(rig.api, dialTo(rig, leads[0]!.phone), 'busy');
  t.equal((await rig.api.request('POST', `/user/calls/${dialTo(rig, leads[1]!.phone).callId}/hangup`, { token: rig.token })).status, 200);
  await rig.tick();
  const statuses = (await leadsOf(rig.api.databaseUrl, id)).map((l) => l.status);
  t.same(statuses, ['cancelled', 'completed', 'calling'], 'busy would be retried: cancelled; the ended call completed; the live one goes on');
  await carrierSays(rig.api, dialTo(rig, leads[2]!.phone), 'no-answer');
  await rig.tick();
  t.equal((await leadsOf(rig.api.databaseUrl, id))[2]!.status, 'cancelled');
  t.equal((await campaignOf(rig.api.databaseUrl, id)).status, 'cancelled', 'a cancelled campaign stays cancelled');
});

t.test("a campaign's call: variables merged and rendered, listed by campaign with its name", async (t) => {
  const rig = await campaignRig(t);
  const id = await insertCampaign(rig, { name: 'Winter renewals', variables: { company: 'Globex', topic: 'the renewal' } });
  await insertLeads(rig, id, [{ phone: '+14155550123', variables: { name: 'Ada' } }], rig.clock.now());
  await rig.tick();
  const callId = rig.dials[0]!.callId;
  t.equal(rig.api.platform.runtime.services.voice.session(callId)?.spec.greeting, 'Hello Ada, this is Globex about the renewal.', "the lead's over the campaign's over the assistant's");
  const listed = await rig.api.request('GET', `/user/calls?campaign_id=${id}`, { token: rig.token });
  t.equal(listed.status, 200);
  t.equal(listed.body.total, 1);
  t.match(listed.body.data[0], { id: callId, type: 'outbound', campaign_name: 'Winter renewals', client_phone_number: '+14155550123' });
  const call = (await rig.api.request('GET', `/user/calls/${callId}`, { token: rig.token })).body.data;
  t.same(call.variables, { company: 'Globex', topic: 'the renewal', name: 'Ada' }, 'the call records the campaign and lead variables');
  t.equal((await rig.api.request('GET', '/user/calls?campaign_id=999999', { token: rig.token })).status, 422, "another's (or no) campaign is refused");
});

t.test('end to end over HTTP: created, filled and started through the API, dialled, completed', async (t) => {
  const api = await startTestPlatform(t, { campaigns: { callsPerSecond: 5, tickMs: 200, leaseMs: 60_000 } });
  const user = await api.user();
  await api.credit(user.id, 50);
  const number = await api.phoneNumber(user.token);
  const assistant = await api.assistant(user.token, { type: 'outbound', phone_number_id: number.id });
  const schedule = { timezone: 'UTC', days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], start_time: '00:00', end_time: '23:59' };
  const created = await api.request('POST', '/user/campaigns', { token: user.token, body: { name: 'Over HTTP', assistant_id: assistant.id, schedule, max_attempts: 1 } });
  t.equal(created.status, 201);
  const id = created.body.data.id as number;
  const leads = [{ phone_number: '+14155550001' }, { phone_number: '+14155550003' }, { phone_number: '+14155550105', variables: { name: 'Ada' } }];
  t.equal((await api.request('POST', `/user/campaigns/${id}/leads`, { token: user.token, body: { leads } })).body.data.added, 3);
  t.equal((await api.request('POST', `/user/campaigns/${id}/start`, { token: user.token })).status, 200);
  const answered = await until('the answering number to be in a call', async () => {
    const calls = (await api.request('GET', `/user/calls?campaign_id=${id}`, { token: user.token })).body.data as Array<{ id: number; status: string; client_phone_number: string }>;
    return calls.find((call) => call.client_phone_number === '+14155550105' && call.status === 'in-progress');
  });
  t.equal((await api.request('POST', `/user/calls/${answered.id}/hangup`, { token: user.token })).status, 200);
  const done = await until('the campaign to complete', async () => {
    const campaign = (await api.request('GET', `/user/campaigns/${id}`, { token: user.token })).body.data;
    return campaign.status === 'completed' ? campaign : undefined;
  });
  t.match(done.stats, { total: 3, pending: 0, calling: 0, completed: 1, busy: 1, failed: 1, attempts: 3 });
  const listed = (await api.request('GET', `/user/campaigns/${id}/leads`, { token: user.token })).body.data as Array<{ phone_number: string; status: string; attempts: number }>;
  t.same(listed.map((lead) => [lead.phone_number, lead.status, lead.attempts]), [['+14155550001', 'busy', 1], ['+14155550003', 'failed', 1], ['+14155550105', 'completed', 1]]);
  const calls = (await api.request('GET', `/user/calls?campaign_id=${id}`, { token: user.token })).body.data as Array<{ campaign_name: string; variables: Record<string, unknown> }>;
  t.equal(calls.length, 3, 'one call per lead');
  t.ok(calls.every((call) => call.campaign_name === 'Over HTTP'));
});
