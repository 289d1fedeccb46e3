import type { CommonQueryMethods, DatabasePool } from 'slonik';
import { CAMPAIGN_DEFAULTS, MAX_LEADS_PER_UPLOAD, WEEK_DAYS, type CampaignInput, type CampaignStatus, type LeadStatus, type ScheduleInput } from '../../schemas/campaigns.js';
import { isTimezone } from '../assistants/rules.js';
import { PlatformError, ValidationError, type FieldErrors } from '../errors.js';
import type { Logger } from '../logger.js';
import { checkedNumber, leadCandidates, shownNumber, tooManyRows, type InvalidLead, type LeadSource } from './leads.js';
import {
  NO_LEADS,
  addDoNotCall,
  campaignAssistant,
  cancelLeads,
  deleteCampaign,
  findCampaign,
  hasLeadToCall,
  insertCampaign,
  insertLeads,
  listCampaigns,
  listDoNotCall,
  listLeads,
  moveCampaign,
  removeDoNotCall,
  statsOf,
  updateCampaign,
  type CampaignRow,
  type CampaignSettings,
  type CampaignStats,
  type DoNotCallRow,
  type LeadRow,
  type Schedule,
} from './repository.js';

/**
 * Outbound campaigns as the API sees them: settings, the moves between statuses (the dialler
 * alone completes a running campaign), leads added in bulk, and the owner's do-not-call list.
 */

/** A campaign as the API shows it: its settings at the top level and its leads counted. */
export type Campaign = CampaignRow & { stats: CampaignStats };

export interface Page<T> {
  readonly items: readonly T[];
  readonly total: number;
  readonly page: number;
  readonly perPage: number;
}

export interface LeadsAdded {
  added: number;
  skipped_duplicates: number;
  do_not_call: number;
  invalid: InvalidLead[];
}

export type CampaignMove = 'start' | 'pause' | 'resume' | 'cancel';

const MOVES: Readonly<Record<CampaignMove, { from: readonly CampaignStatus[]; to: CampaignStatus; done: string }>> = {
  start: { from: ['draft'], to: 'running', done: 'started' },
  pause: { from: ['running'], to: 'paused', done: 'paused' },
  resume: { from: ['paused'], to: 'running', done: 'resumed' },
  cancel: { from: ['running', 'paused'], to: 'cancelled', done: 'cancelled' },
};

function refusedMove(move: CampaignMove, status: CampaignStatus): ValidationError {
  const message =
    move === 'start' && status === 'paused'
      ? 'A paused campaign is resumed, not started.'
      : move === 'cancel' && status === 'draft'
        ? 'A draft campaign is deleted, not cancelled.'
        : `A ${status} campaign cannot be ${MOVES[move].done}.`;
  return ValidationError.field('status', message);
}

/** Leads inserted per statement: large enough that 100,000 take a few round trips, small enough to bound one statement's parameters. */
const LEAD_BATCH = 5_000;

export function createCampaignService({ pool, logger }: { pool: DatabasePool; logger: Logger }) {
  /**
   * Why the assistant cannot dial a campaign, as field errors (none when it can); the row is
   * locked until the transaction ends. Its timezone is the schedule's default.
   */
  async function assistantCheck(tx: CommonQueryMethods, userId: number, assistantId: number | null): Promise<{ errors: FieldErrors; timezone?: string }> {
    const refuse = (message: string) => ({ errors: { assistant_id: [message] } });
    if (assistantId === null) return refuse('The campaign has no assistant (it was deleted): choose one with an update.');
    const assistant = await campaignAssistant(tx, userId, assistantId);
    if (!assistant) return refuse('The selected assistant id is invalid.');
    if (assistant.type !== 'outbound') return { ...refuse('The assistant must be an outbound assistant.'), timezone: assistant.timezone };
    if (assistant.phone_number_id === null) return { ...refuse('The assistant has no phone number to call from.'), timezone: assistant.timezone };
    if (assistant.usable === false) return { ...refuse("The assistant's phone number has lapsed: it is renewed once the balance covers its month."), timezone: assistant.timezone };
    return { errors: {}, timezone: assistant.timezone };
  }

  /**
   * The schedule with its defaults filled in, or its field errors. An end at or before the start
   * is a window past midnight (22:00-06:00), or all day when they are equal (runtime/campaigns/window.ts).
   */
  function scheduleOf(input: ScheduleInput, timezone: string | undefined, errors: FieldErrors): Schedule {
    const zone = input.timezone ?? timezone ?? 'UTC';
    if (!isTimezone(zone)) errors['schedule.timezone'] = ['The schedule timezone must be a valid zone.'];
    const start = input.start_time ?? CAMPAIGN_DEFAULTS.start_time;
    const end = input.end_time ?? CAMPAIGN_DEFAULTS.end_time;
    const days = input.days ? WEEK_DAYS.filter((day) => input.days!.includes(day)) : [...CAMPAIGN_DEFAULTS.days];
    return { timezone: zone, days, start_time: start, end_time: end };
  }

  async function withStats(rows: readonly CampaignRow[], userId: number): Promise<Campaign[]> {
    const stats = await statsOf(pool, userId, rows.map((row) => row.id));
    return rows.map((row) => ({ ...row, stats: stats.get(row.id) ?? { ...NO_LEADS } }));
  }

  async function read(userId: number, id: number): Promise<Campaign> {
    const row = await findCampaign(pool, userId, id);
    if (!row) throw new PlatformError('campaign_not_found');
    return (await withStats([row], userId))[0]!;
  }

  function settingsFrom(base: CampaignSettings, input: Partial<CampaignInput>): CampaignSettings {
    return {
      name: input.name ?? base.name,
      assistant_id: input.assistant_id ?? base.assistant_id,
      schedule: base.schedule,
      max_concurrent_calls: input.max_concurrent_calls ?? base.max_concurrent_calls,
      max_attempts: input.max_attempts ?? base.max_attempts,
      retry_interval_minutes: input.retry_interval_minutes ?? base.retry_interval_minutes,
      retry_on: input.retry_on ? [...new Set(input.retry_on)] : base.retry_on,
      variables: input.variables ?? base.variables,
    };
  }

  return {
    /** @throws ValidationError with every failing field (the assistant's and the schedule's included). */
    async create(userId: number, input: CampaignInput): Promise<Campaign> {
      const row = await pool.transaction(async (tx) => {
        const { errors, timezone } = await assistantCheck(tx, userId, input.assistant_id);
        const base = { ...CAMPAIGN_DEFAULTS, retry_on: [...CAMPAIGN_DEFAULTS.retry_on], name: input.name, assistant_id: input.assistant_id, schedule: undefined as never, variables: {} };
        const settings = { ...settingsFrom(base, input), schedule: scheduleOf(input.schedule ?? {}, timezone, errors) };
        if (Object.keys(errors).length > 0) throw new ValidationError(errors);
        return insertCampaign(tx, userId, settings);
      });
      logger.info({ userId, campaignId: row.id }, 'campaign created');
      return { ...row, stats: { ...NO_LEADS } };
    },

    async list(userId: number, status: CampaignStatus | undefined, page: number, perPage: number): Promise<Page<Campaign>> {
      const found = await listCampaigns(pool, userId, status, page, perPage);
      return { items: await withStats(found.items, userId), total: found.total, page, perPage };
    },

    get: read,

    /**
     * Given fields replace the stored ones (`schedule`, `retry_on` and `variables` whole; a
     * schedule's left-out keys take their defaults, its timezone the assistant's). `input`
     * validates the body once the campaign is found.
     */
    async update(userId: number, id: number, input: () => Partial<CampaignInput>): Promise<Campaign> {
      if (!(await findCampaign(pool, userId, id))) throw new PlatformError('campaign_not_found');
      const given = input();
      await pool.transaction(async (tx) => {
        const stored = await findCampaign(tx, userId, id, 'update');
        if (!stored) throw new PlatformError('campaign_not_found');
        const settings = settingsFrom(stored, given);
        const errors: FieldErrors = {};
        let timezone = stored.schedule.timezone;
        if (given.assistant_id !== undefined || (given.schedule && given.schedule.timezone === undefined && settings.assistant_id !== null)) {
          const checked = await assistantCheck(tx, userId, settings.assistant_id);
          if (given.assistant_id !== undefined) Object.assign(errors, checked.errors);
          timezone = checked.timezone ?? timezone;
        }
        if (given.schedule) settings.schedule = scheduleOf(given.schedule, timezone, errors);
        if (Object.keys(errors).length > 0) throw new ValidationError(errors);
        await updateCampaign(tx, userId, id, settings);
      });
      logger.info({ userId, campaignId: id }, 'campaign updated');
      return read(userId, id);
    },

    /** @throws ValidationError while it is running (pause or cancel it first). */
    async remove(userId: number, id: number): Promise<void> {
      const outcome = await deleteCampaign(pool, userId, id);
      if (outcome === 'missing') throw new PlatformError('campaign_not_found');
      if (outcome === 'running') throw ValidationError.field('status', 'A running campaign cannot be deleted: pause or cancel it first.');
      logger.info({ userId, campaignId: id }, 'campaign deleted');
    },

    /**
     * A move of spec'd campaign statuses. Start and resume need a dialling assistant (and start a
     * lead to call); cancel also cancels the leads still to be called (a lead being called follows its call).
     */
    async move(userId: number, id: number, move: CampaignMove): Promise<Campaign> {
      const { from, to } = MOVES[move];
      await pool.transaction(async (tx) => {
        const campaign = await findCampaign(tx, userId, id, 'update');
        if (!campaign) throw new PlatformError('campaign_not_found');
        if (!from.includes(campaign.status)) throw refusedMove(move, campaign.status);
        if (move === 'start' || move === 'resume') {
          const errors = (await assistantCheck(tx, userId, campaign.assistant_id)).errors;
          if (move === 'start' && !(await hasLeadToCall(tx, userId, id))) errors.leads = ['The campaign has no lead to call: add leads first.'];
          if (Object.keys(errors).length > 0) throw new ValidationError(errors);
        }
        await moveCampaign(tx, userId, id, from, to);
        if (move === 'cancel') await cancelLeads(tx, userId, id);
      });
      logger.info({ userId, campaignId: id, status: to }, 'campaign moved');
      return read(userId, id);
    },

    /**
     * Adds leads in bulk, in one transaction: good rows are kept, bad ones reported by line (CSV)
     * or index (JSON), numbers the campaign has (or the upload had before) skipped and counted,
     * numbers on the do-not-call list added as `do-not-call`. The campaign stays locked (shared)
     * meanwhile, so it cannot complete under the upload.
     * @throws ValidationError for a completed or cancelled campaign, a file that is no CSV with a
     *   phone_number column, or more than 100,000 rows.
     */
    async addLeads(userId: number, id: number, source: () => LeadSource): Promise<LeadsAdded> {
      if (!(await findCampaign(pool, userId, id))) throw new PlatformError('campaign_not_found');
      const given = source();
      const result = await pool.transaction(async (tx) => {
        const campaign = await findCampaign(tx, userId, id, 'share');
        if (!campaign) throw new PlatformError('campaign_not_found');
        if (campaign.status === 'completed' || campaign.status === 'cancelled') throw ValidationError.field('status', `Leads cannot be added to a ${campaign.status} campaign.`);
        const outcome: LeadsAdded = { added: 0, skipped_duplicates: 0, do_not_call: 0, invalid: [] };
        const seen = new Set<string>();
        let phones: string[] = [];
        let variables: string[] = [];
        let rows = 0;
        const flush = async () => {
          if (phones.length === 0) return;
          const inserted = await insertLeads(tx, userId, id, phones, variables);
          outcome.added += inserted.added;
          outcome.do_not_call += inserted.do_not_call;
          outcome.skipped_duplicates += phones.length - inserted.added;
          phones = [];
          variables = [];
        };
        for (const candidate of leadCandidates(given)) {
          if (++rows > MAX_LEADS_PER_UPLOAD) throw tooManyRows(given.kind);
          const checked = checkedNumber(candidate);
          if ('reason' in checked) {
            outcome.invalid.push({ line: candidate.line, phone_number: shownNumber(candidate.phone), reason: checked.reason });
          } else if (seen.has(checked.phone)) {
            outcome.skipped_duplicates++;
          } else {
            seen.add(checked.phone);
            phones.push(checked.phone);
            variables.push(JSON.stringify(candidate.variables));
            if (phones.length >= LEAD_BATCH) await flush();
          }
        }
        await flush();
        return outcome;
      });
      logger.info({ userId, campaignId: id, added: result.added, skipped: result.skipped_duplicates, invalid: result.invalid.length }, 'campaign leads added');
      return result;
    },

    async leads(userId: number, id: number, status: LeadStatus | undefined, page: number, perPage: number): Promise<Page<LeadRow>> {
      if (!(await findCampaign(pool, userId, id))) throw new PlatformError('campaign_not_found');
      const found = await listLeads(pool, userId, id, status, page, perPage);
      return { ...found, page, perPage };
    },

    /** Puts a number on the list; the owner's leads with it that were still to be called become `do-not-call`. */
    async addDoNotCall(userId: number, phone: string): Promise<{ entry: DoNotCallRow; created: boolean; leads: number }> {
      const result = await pool.transaction((tx) => addDoNotCall(tx, userId, phone));
      logger.info({ userId, leads: result.leads }, 'number put on the do-not-call list');
      return result;
    },

    async listDoNotCall(userId: number, page: number, perPage: number): Promise<Page<DoNotCallRow>> {
      return { ...(await listDoNotCall(pool, userId, page, perPage)), page, perPage };
    },

    /** Takes a number off the list (leads already marked `do-not-call` stay so). */
    async removeDoNotCall(userId: number, phone: string): Promise<void> {
      if (!(await removeDoNotCall(pool, userId, phone))) throw new PlatformError('do_not_call_not_found');
    },
  };
}

export type CampaignService = ReturnType<typeof createCampaignService>;
