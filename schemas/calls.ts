import { integer, oneOf, record, text, uuid } from './rules.js';
import { paginationQueryFields } from './pagination.js';
import { compileSchema } from './validator.js';

export const CALL_STATUSES = ['initiated', 'ringing', 'busy', 'in-progress', 'ended', 'completed', 'ended_by_customer', 'ended_by_assistant', 'no-answer', 'failed'] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];

const DAY = /^\d{4}-\d{2}-\d{2}$/;

export interface ListCallsQuery {
  status?: CallStatus;
  type?: 'inbound' | 'outbound' | 'web';
  phone_number?: string;
  assistant_id?: number;
  campaign_id?: number;
  date_from?: string;
  date_to?: string;
  search?: string;
  search_after?: string;
  per_page?: number;
  page?: number;
}

export const listCallsSchema = compileSchema<ListCallsQuery>({
  status: oneOf(CALL_STATUSES, { optional: true }),
  type: oneOf(['inbound', 'outbound', 'web'], { optional: true }),
  phone_number: text({ optional: true, max: 32, description: 'Client phone number' }),
  assistant_id: integer({ optional: true, min: 1 }),
  campaign_id: integer({ optional: true, min: 1 }),
  date_from: text({ optional: true, pattern: DAY, patternMessage: 'The date from does not match the format Y-m-d.' }),
  date_to: text({ optional: true, pattern: DAY, patternMessage: 'The date to does not match the format Y-m-d.' }),
  search: text({ optional: true, max: 200, description: 'Words that must all occur in the transcript' }),
  search_after: text({ optional: true, max: 200, pattern: /^[A-Za-z0-9_-]+$/, patternMessage: 'The search after cursor is invalid.', description: 'With search: the next_search_after of the previous page, for deep pages' }),
  ...paginationQueryFields,
});

const E164 = /^\+[1-9]\d{6,14}$/;

export const placeCallSchema = compileSchema<{ assistant_id: number; phone_number: string; variables?: Record<string, string | number | boolean> }>({
  assistant_id: integer({ min: 1, description: 'An outbound assistant of yours with a phone number' }),
  phone_number: text({ max: 16, pattern: E164, patternMessage: 'The phone number must be in E.164 format (for example +14155550100).', description: 'Number to call, E.164' }),
  variables: record({ optional: true, description: 'Values for {{variables}} in the prompts of this call' }),
});

export const webCallSchema = compileSchema<{ assistant_id: string }>({
  assistant_id: uuid({ description: 'The assistant UUID' }),
});

/** Events per page of a call's events by default; a call rarely has more. */
export const CALL_EVENTS_PER_PAGE = 100;

export const callEventsSchema = compileSchema<{ per_page?: number; page?: number }>({
  per_page: integer({ optional: true, min: 1, max: 500, description: 'Events per page, 1-500; default 100' }),
  page: integer({ optional: true, min: 1, description: 'Page number, from 1' }),
});
