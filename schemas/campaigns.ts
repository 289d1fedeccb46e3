import { E164 } from './phoneNumbers.js';
import { paginationQueryFields } from './pagination.js';
import { arrayOf, integer, object, oneOf, record, text } from './rules.js';
import { compileSchema } from './validator.js';
import { jsonSchemaOf, type FvRule } from './jsonSchema.js';
import * as shape from './shapes.js';

/**
 * Outbound campaigns: the request schemas of the campaign, lead and do-not-call operations, and
 * the fixed sets of values the API shows (the data model is migration 0027).
 */

export const CAMPAIGN_STATUSES = ['draft', 'running', 'paused', 'completed', 'cancelled'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];

export const LEAD_STATUSES = ['pending', 'calling', 'completed', 'retrying', 'failed', 'no-answer', 'busy', 'voicemail', 'cancelled', 'do-not-call'] as const;
export type LeadStatus = (typeof LEAD_STATUSES)[number];

/** Why a running (or, for `assistant_deleted`, paused) campaign is not dialling. */
export const STATUS_REASONS = ['outside_window', 'insufficient_balance', 'assistant_deleted', 'assistant_unavailable'] as const;

export const RETRY_OUTCOMES = ['no-answer', 'busy', 'failed', 'voicemail'] as const;
export type RetryOutcome = (typeof RETRY_OUTCOMES)[number];

export const WEEK_DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type WeekDay = (typeof WEEK_DAYS)[number];

/** `HH:MM`, 00:00 to 23:59. */
export const CLOCK_TIME = /^([01]\d|2[0-3]):[0-5]\d$/;

/** What a campaign takes when a setting is left out on create (the schedule's timezone is its assistant's). */
export const CAMPAIGN_DEFAULTS = {
  days: ['mon', 'tue', 'wed', 'thu', 'fri'] as WeekDay[],
  start_time: '09:00',
  end_time: '17:00',
  max_concurrent_calls: 5,
  max_attempts: 3,
  retry_interval_minutes: 60,
  retry_on: ['no-answer', 'busy'] as RetryOutcome[],
} as const;

/** Most leads one request adds (a CSV's data rows, or a JSON list). */
export const MAX_LEADS_PER_UPLOAD = 100_000;

export const E164_MESSAGE = 'The phone number must be in E.164 format (for example +14155550100).';

export interface ScheduleInput {
  timezone?: string;
  days?: WeekDay[];
  start_time?: string;
  end_time?: string;
}

export interface CampaignInput {
  name: string;
  assistant_id: number;
  schedule?: ScheduleInput;
  max_concurrent_calls?: number;
  max_attempts?: number;
  retry_interval_minutes?: number;
  retry_on?: RetryOutcome[];
  variables?: Record<string, string | number | boolean>;
}

const clock = (what: string, defaultValue: string) =>
  text({ optional: true, pattern: CLOCK_TIME, patternMessage: `The schedule ${what} must be a time in the format HH:MM.`, defaultValue, description: `Local time (HH:MM, 24-hour) when dialling ${what === 'start time' ? 'starts' : 'stops'} each day` });

function campaignFields(onCreate: boolean) {
  const optional = !onCreate;
  return {
    name: text({ optional, max: 255, notBlank: true, description: 'Name of the campaign, shown on its calls as campaign_name' }),
    assistant_id: integer({ optional, min: 1, description: 'An outbound assistant of yours with a phone number: it places the calls' }),
    schedule: object(
      {
        timezone: text({ optional: true, max: 64, description: "IANA time zone of the window (e.g. America/New_York); default the assistant's timezone" }),
        days: arrayOf(oneOf(WEEK_DAYS, { description: 'A week day' }), { optional: true, min: 1, max: 7, defaultValue: CAMPAIGN_DEFAULTS.days, description: 'Week days on which leads are dialled (mon..sun)' }),
        start_time: clock('start time', CAMPAIGN_DEFAULTS.start_time),
        end_time: clock('end time', CAMPAIGN_DEFAULTS.end_time),
      },
      { optional: true, description: 'When leads may be dialled: days and hours in a time zone; a call live at the end of the window finishes. Given on update, it replaces the whole schedule (left-out keys take their defaults)' },
    ),
    max_concurrent_calls: integer({ optional: true, min: 1, max: 100, defaultValue: CAMPAIGN_DEFAULTS.max_concurrent_calls, description: 'Most live calls of the campaign at once, across every server process' }),
    max_attempts: integer({ optional: true, min: 1, max: 10, defaultValue: CAMPAIGN_DEFAULTS.max_attempts, description: 'Most calls to one lead' }),
    retry_interval_minutes: integer({ optional: true, min: 1, max: 10_080, defaultValue: CAMPAIGN_DEFAULTS.retry_interval_minutes, description: 'Minutes between the end of a retried call and the next attempt (inside the window)' }),
    retry_on: arrayOf(oneOf(RETRY_OUTCOMES, { description: 'An outcome of a call' }), { optional: true, max: 4, defaultValue: CAMPAIGN_DEFAULTS.retry_on, description: 'Outcomes that are tried again (no-answer, busy, failed, voicemail); others are final' }),
    variables: record({ optional: true, defaultValue: {}, description: "Values for {{variables}} in the assistant's prompt and greeting, for every lead (a lead's own variables win)" }),
  };
}

export const createCampaignSchema = compileSchema<CampaignInput>(campaignFields(true));
export const updateCampaignSchema = compileSchema<Partial<CampaignInput>>(campaignFields(false));

export const listCampaignsSchema = compileSchema<{ status?: CampaignStatus; per_page?: number; page?: number }>({
  status: oneOf(CAMPAIGN_STATUSES, { optional: true, description: 'Only campaigns in this status' }),
  ...paginationQueryFields,
});

export const listLeadsSchema = compileSchema<{ status?: LeadStatus; per_page?: number; page?: number }>({
  status: oneOf(LEAD_STATUSES, { optional: true, description: 'Only leads in this status' }),
  ...paginationQueryFields,
});

export interface LeadInput {
  phone_number: string;
  variables?: Record<string, string | number | boolean>;
}

/**
 * The JSON form of adding leads. Each lead's number is checked by the service, not here: a bad
 * lead is reported with its index and the others are kept.
 */
export const addLeadsSchema = compileSchema<{ leads?: LeadInput[] }>({
  leads: arrayOf(
    object(
      {
        phone_number: { type: 'any', optional: true, jsonSchema: { type: 'string' }, description: 'The number to call, E.164 (+14155550100); spaces, dashes, dots and brackets are ignored. A lead without one is reported among the invalid' },
        variables: record({ optional: true, description: "This lead's values for {{variables}} (win over the campaign's)" }),
      },
      { description: 'A lead' },
    ),
    { optional: true, max: MAX_LEADS_PER_UPLOAD, description: 'The leads (JSON). Required unless a CSV file is sent as multipart/form-data in the field `file`: a `phone_number` column, every other column a variable (its header the name), at most 20 MB and 100,000 rows' },
  ),
});

export const doNotCallSchema = compileSchema<{ phone_number: string }>({
  phone_number: text({ max: 16, pattern: E164, patternMessage: E164_MESSAGE, description: 'The number campaigns must never dial, E.164' }),
});

export const listDoNotCallSchema = compileSchema<{ per_page?: number; page?: number }>({ ...paginationQueryFields });

// Answers (JSON Schemas of the OpenAPI document), read from the same rules where they are settings.

const campaignSettings = campaignFields(true);
const setting = (name: keyof typeof campaignSettings) => jsonSchemaOf(campaignSettings[name] as FvRule);
const scheduleProps = (campaignSettings.schedule as unknown as { props: Record<string, FvRule> }).props;

const stats = shape.object(
  {
    total: shape.integer('Leads in all'),
    pending: shape.integer('Leads still to be called (pending, or retrying later)'),
    calling: shape.integer('Leads being called now'),
    completed: shape.integer('Leads whose call was answered and ended'),
    failed: shape.integer('Leads whose calls failed (final)'),
    no_answer: shape.integer('Leads that never answered (final)'),
    busy: shape.integer('Leads that were busy (final)'),
    voicemail: shape.integer('Leads whose call reached voicemail (final)'),
    cancelled: shape.integer('Leads cancelled with the campaign'),
    do_not_call: shape.integer('Leads on the do-not-call list, never called'),
    attempts: shape.integer('Calls placed to the leads, retries included'),
  },
  'Its leads counted by status',
);

export const campaignResponse = shape.object(
  {
    id: shape.integer('Campaign id (calls carry it as campaign_id)'),
    name: shape.string('Name of the campaign'),
    assistant_id: shape.nullable(shape.integer('The assistant that places its calls; null once that assistant was deleted')),
    status: shape.oneOf(CAMPAIGN_STATUSES, 'draft (being prepared), running (dialling), paused, completed (no lead left to call), cancelled'),
    status_reason: shape.nullable(
      shape.oneOf(STATUS_REASONS, 'Why a running campaign is not dialling: outside_window, insufficient_balance (less than a minute of calling left), assistant_unavailable (not outbound, or no usable number); assistant_deleted on a campaign paused by its assistant\'s deletion; null otherwise'),
    ),
    schedule: shape.object(
      {
        timezone: shape.string('IANA time zone of the window'),
        days: shape.array(shape.oneOf(WEEK_DAYS, 'A week day'), 'Week days on which leads are dialled'),
        start_time: { ...jsonSchemaOf(scheduleProps.start_time!), description: 'When dialling starts each day (HH:MM, local)' },
        end_time: { ...jsonSchemaOf(scheduleProps.end_time!), description: 'When dialling stops each day (HH:MM, local; at or before start_time: the next day, equal to it: all day); a live call finishes' },
      },
      'When leads may be dialled',
    ),
    max_concurrent_calls: setting('max_concurrent_calls'),
    max_attempts: setting('max_attempts'),
    retry_interval_minutes: setting('retry_interval_minutes'),
    retry_on: setting('retry_on'),
    variables: setting('variables'),
    stats,
    created_at: shape.isoTimestamp('When it was created'),
    updated_at: shape.isoTimestamp('When it last changed'),
  },
  'A campaign',
);

export const leadResponse = shape.object(
  {
    id: shape.integer('Lead id'),
    phone_number: shape.string('The number called, E.164'),
    variables: shape.anyObject("This lead's values for {{variables}}"),
    status: shape.oneOf(LEAD_STATUSES, 'pending, calling, retrying (called again at next_attempt_at), or final: completed, failed, no-answer, busy, voicemail, cancelled, do-not-call'),
    attempts: shape.integer('Calls placed to it so far'),
    last_call_id: shape.nullable(shape.integer('Its latest call (GET /user/calls/{id}); null before the first')),
    next_attempt_at: shape.nullable(shape.isoTimestamp('When it may be called next (inside the window); null unless pending or retrying')),
    updated_at: shape.isoTimestamp('When it last changed'),
  },
  'A lead of a campaign',
);

export const leadsAddedResponse = shape.object(
  {
    added: shape.integer('Leads added (do-not-call ones included)'),
    skipped_duplicates: shape.integer('Numbers skipped: the campaign had them already, or the upload had them before'),
    do_not_call: shape.integer('Of the added, leads whose number is on your do-not-call list: added as do-not-call, never called'),
    invalid: shape.array(
      shape.object(
        {
          line: shape.integer('Where the row is: its line in the CSV file (the header is line 1), or its index in the JSON list (from 0)'),
          phone_number: shape.string('The number as given'),
          reason: shape.string('Why the row was refused'),
        },
        'A refused row',
      ),
      'Rows refused; the others were kept',
    ),
  },
  'What the upload did',
);

export const doNotCallResponse = shape.object(
  { phone_number: shape.string('The number, E.164'), created_at: shape.isoTimestamp('When it was put on the list') },
  'A number on the do-not-call list',
);
