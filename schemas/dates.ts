import { ValidationError } from '../runtime/errors.js';
import { text } from './rules.js';

/**
 * `YYYY-MM-DD` that names a real day (a pattern alone lets 2026-02-30 through to the database), from
 * year 1 (PostgreSQL has no year 0).
 */
export function checkRealDay(field: string, value: string | undefined): void {
  if (value === undefined) return;
  const parsed = new Date(`${value}T00:00:00Z`);
  if (Number.isNaN(parsed.getTime()) || parsed.toISOString().slice(0, 10) !== value || value.startsWith('0000')) {
    throw ValidationError.field(field, `The ${field.replace(/_/g, ' ')} is not a valid date.`);
  }
}

/** `YYYY-MM-DD` in shape; `checkRealDay` then checks the day exists. */
export const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** Query fields `date_from` and `date_to` of a listing: inclusive UTC days. */
export const dayRangeQueryFields = {
  date_from: text({ optional: true, pattern: DAY, patternMessage: 'The date from does not match the format Y-m-d.', description: 'From this UTC day (YYYY-MM-DD), inclusive' }),
  date_to: text({ optional: true, pattern: DAY, patternMessage: 'The date to does not match the format Y-m-d.', description: 'Until this UTC day (YYYY-MM-DD), inclusive' }),
};
