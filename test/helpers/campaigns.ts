import type { Test } from 'tap';
import { createLoopbackCarrier, type LoopbackDial } from '../../runtime/calls/carriers/loopback.js';
import { CarrierError, type Carrier } from '../../runtime/calls/carriers/types.js';
import type { Config } from '../../runtime/config.js';
import { withClient } from './database.js';
import type { TestPlatform } from './platform.js';
import { voiceSetup, type VoiceSetup } from './voice.js';

/**
 * Campaigns for the dialler's tests, written straight into the database (as the campaigns' API
 * would write them), on a platform whose loopback carrier answers nothing by itself: each call it
 * is asked to place is kept in `dials`, and the test decides its fate (a carrier status, an answer).
 */

export interface CampaignRig extends VoiceSetup {
  /** The calls the carrier was asked to place, in order. */
  readonly dials: LoopbackDial[];
  /** Moves the clock one dialler tick on and waits for what the tick started. */
  tick(ms?: number): Promise<void>;
}

export const DIALLER = { callsPerSecond: 5, tickMs: 1_000, leaseMs: 60_000 } as const satisfies Config['campaigns'];

/** A platform on a manual clock (Tuesday 2026-11-24 10:00 UTC) with a funded owner and an outbound assistant on a number. */
export async function campaignRig(
  t: Test,
  options: { assistant?: Record<string, unknown>; campaigns?: Partial<Config['campaigns']>; config?: Partial<Config> } = {},
): Promise<CampaignRig> {
  const dials: LoopbackDial[] = [];
  const loopback = createLoopbackCarrier((call) => dials.push(call));
  // The carrier's API refuses a number ending in 9999 (as a real one refuses an unreachable number).
  const carrier: Carrier = { ...loopback, place: (request) => (request.to.endsWith('9999') ? Promise.reject(new CarrierError('The number is not reachable')) : loopback.place(request)) };
  const s = await voiceSetup(t, { type: 'outbound', ringing_time: 60, initial_message: 'Hello {{name}}, this is {{company}} about {{topic}}.', variables: { name: 'there', company: 'Acme', topic: 'nothing' }, ...options.assistant }, {
    config: { campaigns: { ...DIALLER, ...options.campaigns }, ...options.config },
    runtime: { carrier },
  });
  return {
    ...s,
    dials,
    async tick(ms = DIALLER.tickMs) {
      s.clock.advance(ms);
      await s.clock.settled();
    },
  };
}

export interface CampaignSettings {
  readonly name?: string;
  readonly status?: string;
  readonly schedule?: Record<string, unknown>;
  readonly maxConcurrentCalls?: number;
  readonly maxAttempts?: number;
  readonly retryIntervalMinutes?: number;
  readonly retryOn?: readonly string[];
  readonly variables?: Record<string, unknown>;
}

/** Every day, all day, in UTC. */
export const ALWAYS = { timezone: 'UTC', days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], start_time: '00:00', end_time: '00:00' };

/** A campaign of the rig's owner and assistant (running unless said otherwise); returns its id. */
export async function insertCampaign(rig: { api: TestPlatform; userId: number; assistantId: number }, settings: CampaignSettings = {}): Promise<number> {
  return withClient(rig.api.databaseUrl, async (db) => {
    const { rows } = await db.query(
      `INSERT INTO campaigns (user_id, name, assistant_id, status, schedule, max_concurrent_calls, max_attempts, retry_interval_minutes, retry_on, variables)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
      [
        rig.userId,
        settings.name ?? 'Autumn offer',
        rig.assistantId,
        settings.status ?? 'running',
        JSON.stringify(settings.schedule ?? ALWAYS),
        settings.maxConcurrentCalls ?? 5,
        settings.maxAttempts ?? 3,
        settings.retryIntervalMinutes ?? 60,
        settings.retryOn ?? ['no-answer', 'busy'],
        JSON.stringify(settings.variables ?? {}),
      ],
    );
    return Number(rows[0].id);
  });
}

/** Leads of a campaign, due at `dueAt` (ms; the clock's time when omitted is the caller's to pass). */
export async function insertLeads(rig: { api: TestPlatform; userId: number }, campaignId: number, leads: ReadonlyArray<{ phone: string; variables?: Record<string, unknown> }>, dueAt: number): Promise<number[]> {
  return withClient(rig.api.databaseUrl, async (db) => {
    const { rows } = await db.query(
      `INSERT INTO campaign_leads (campaign_id, user_id, phone_number, variables, next_attempt_at)
       SELECT $1, $2, phone, variables, $5 FROM unnest($3::text[], $4::jsonb[]) WITH ORDINALITY AS l(phone, variables, n) ORDER BY n RETURNING id`,
      [campaignId, rig.userId, leads.map((l) => l.phone), leads.map((l) => JSON.stringify(l.variables ?? {})), new Date(dueAt).toISOString()],
    );
    return rows.map((row: { id: string }) => Number(row.id));
  });
}

export interface LeadRow {
  readonly id: number;
  readonly phone_number: string;
  readonly status: string;
  readonly attempts: number;
  readonly last_call_id: number | null;
  readonly next_attempt_at: string;
}

export async function leadsOf(databaseUrl: string, campaignId: number): Promise<LeadRow[]> {
  return withClient(databaseUrl, async (db) =>
    (await db.query(`SELECT id, phone_number, status, attempts, last_call_id, next_attempt_at FROM campaign_leads WHERE campaign_id = $1 ORDER BY id`, [campaignId])).rows.map((row) => ({
      ...row,
      id: Number(row.id),
      last_call_id: row.last_call_id === null ? null : Number(row.last_call_id),
      next_attempt_at: (row.next_attempt_at as Date).toISOString(),
    })),
  );
}

export async function campaignOf(databaseUrl: string, id: number): Promise<{ status: string; status_reason: string | null }> {
  return withClient(databaseUrl, async (db) => (await db.query(`SELECT status, status_reason FROM campaigns WHERE id = $1`, [id])).rows[0]);
}

/** Every call of a campaign: its lead, attempt, status and number. */
export async function campaignCalls(databaseUrl: string, campaignId: number): Promise<Array<{ id: number; lead: number; attempt: number; status: string; to: string; live: boolean }>> {
  return withClient(databaseUrl, async (db) =>
    (
      await db.query(`SELECT id, campaign_lead_id, campaign_attempt, status, client_phone_number, ended_at IS NULL AS live FROM calls WHERE campaign_id = $1 ORDER BY id`, [campaignId])
    ).rows.map((row) => ({ id: Number(row.id), lead: Number(row.campaign_lead_id), attempt: row.campaign_attempt, status: row.status, to: row.client_phone_number, live: row.live })),
  );
}

/** Runs SQL against the rig's database. */
export async function sqlOn(databaseUrl: string, text: string, values: unknown[] = []): Promise<void> {
  await withClient(databaseUrl, (db) => db.query(text, values));
}

/** The carrier's status callback for a placed call (Twilio's words: `busy`, `no-answer`, `failed`, `completed`). */
export async function carrierSays(api: TestPlatform, dial: LoopbackDial, status: string, answeredBy?: string): Promise<void> {
  const form = new URLSearchParams({ CallSid: dial.carrierCallId, CallStatus: status, ...(answeredBy ? { AnsweredBy: answeredBy } : {}) });
  const answer = await api.request('POST', `/telephony/twilio/status?call_id=${dial.callId}`, { raw: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  if (answer.status !== 200) throw new Error(`status callback refused: ${answer.status}`);
  await api.platform.runtime.services.voice.whenEnded(dial.callId);
}
