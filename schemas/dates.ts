import { ValidationError } from '../runtime/errors.js';

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
