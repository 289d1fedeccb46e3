import t, { type Test } from 'tap';
import { withClient } from './helpers/database.js';
import { until } from './helpers/server_process.js';
import { startSite } from './helpers/site.js';
import { voiceSetup, type VoiceSetup } from './helpers/voice.js';

/**
 * The `call.ended` webhook of a call names the campaign and lead that dialled it:
 * 1. An outbound call whose row carries a campaign and a lead (set with SQL here, as the dialler
 *    sets them when it places the call), hung up by its owner: the payload has `campaign_id` and
 *    `campaign_lead_id`.
 * 2. An ordinary outbound call of the same assistant: both are null.
 */

async function placeAndHangUp(t: Test, s: VoiceSetup, campaign?: { campaignId: number; leadId: number }): Promise<number> {
  const placed = await s.api.request('POST', '/user/calls', { token: s.token, body: { assistant_id: s.assistantId, phone_number: '+14155550123' } });
  t.equal(placed.status, 201);
  const callId = placed.body.data.id as number;
  if (campaign) {
    await withClient(s.api.databaseUrl, (db) =>
      db.query('UPDATE calls SET campaign_id = $2, campaign_lead_id = $3, campaign_attempt = 1 WHERE id = $1', [callId, campaign.campaignId, campaign.leadId]),
    );
  }
  // Answered first: a call hung up before its answer sends no webhook (send_webhook_only_on_completed).
  await until('the call answered', async () => ((await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data.status === 'in-progress' ? true : undefined));
  const hungUp = await s.api.request('POST', `/user/calls/${callId}/hangup`, { token: s.token });
  t.equal(hungUp.status, 200);
  // The end (and the webhook queued with it) is saved after the hang-up is answered.
  await s.api.platform.runtime.services.voice.saved(callId);
  return callId;
}

t.test("a campaign's call carries its campaign and lead ids in its webhook; another call carries nulls", async (t) => {
  const site = await startSite(t);
  const s = await voiceSetup(t, { type: 'outbound', webhook_url: `${site.origin}/hook`, is_webhook_active: true }, { config: { outboundAllowPrivate: true } });
  const { campaignId, leadId } = await withClient(s.api.databaseUrl, async (db) => {
    const campaign = (await db.query("INSERT INTO campaigns (user_id, name, assistant_id, status) VALUES ($1, 'Spring offer', $2, 'running') RETURNING id", [s.userId, s.assistantId])).rows[0];
    const lead = (await db.query("INSERT INTO campaign_leads (campaign_id, user_id, phone_number, status, attempts) VALUES ($1, $2, '+14155550123', 'calling', 1) RETURNING id", [campaign.id, s.userId])).rows[0];
    return { campaignId: Number(campaign.id), leadId: Number(lead.id) };
  });

  const campaignCall = await placeAndHangUp(t, s, { campaignId, leadId });
  const ordinaryCall = await placeAndHangUp(t, s);
  // The bodies as queued in the outbox, byte for byte what the receiver is sent (delivery itself,
  // which may wait for a post-call evaluation, is the webhook tests' subject).
  const bodies = await withClient(s.api.databaseUrl, async (db) =>
    (await db.query("SELECT body FROM webhook_deliveries WHERE event = 'call.ended' AND call_id = ANY($1)", [[campaignCall, ordinaryCall]])).rows.map((row) => JSON.parse(row.body) as Record<string, unknown>),
  );
  const received = [...bodies];
  const byCall = (id: number) => received.find((payload) => payload.id === id);
  // Null is said, not left out: a missing field is told apart from a null one.
  const ids = (payload: Record<string, unknown> | undefined) => ({
    campaign_id: payload && Object.hasOwn(payload, 'campaign_id') ? payload.campaign_id : 'missing',
    campaign_lead_id: payload && Object.hasOwn(payload, 'campaign_lead_id') ? payload.campaign_lead_id : 'missing',
  });
  t.match(byCall(campaignCall), { event: 'call.ended', id: campaignCall, status: 'ended' });
  t.same(ids(byCall(campaignCall)), { campaign_id: campaignId, campaign_lead_id: leadId }, "the campaign's call names its campaign and lead");
  t.match(byCall(ordinaryCall), { event: 'call.ended', id: ordinaryCall, status: 'ended' });
  t.same(ids(byCall(ordinaryCall)), { campaign_id: null, campaign_lead_id: null }, 'an ordinary call names none');
});
