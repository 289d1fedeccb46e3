/**
 * Timestamps as the API prints them. `<iso_timestamp>` is ISO 8601 UTC with microseconds
 * (`2026-01-31T12:34:56.123456Z`); `<datetime>` is `YYYY-MM-DD HH:MM:SS` in UTC.
 * Timestamps travel through the platform as `<iso_timestamp>` strings, which keep the
 * microseconds PostgreSQL stores and sort lexically.
 */

const PG_TIMESTAMPTZ = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?([+-]\d{2}(?::?\d{2}){0,2}|Z)?$/;

/** Converts PostgreSQL's text form of a timestamptz (any session time zone) to `<iso_timestamp>`. */
export function pgTimestampToIso(value: string): string {
  const match = PG_TIMESTAMPTZ.exec(value);
  if (!match) return value;
  const [, date, time, fraction = '', offset = 'Z'] = match;
  const micros = fraction.padEnd(6, '0');
  if (offset === 'Z' || /^[+-]00(?::?00){0,2}$/.test(offset)) return `${date}T${time}.${micros}Z`;
  const sign = offset.startsWith('-') ? -1 : 1;
  const [hours = '0', minutes = '0', seconds = '0'] = offset.slice(1).split(':').flatMap((part) => (part.length === 4 ? [part.slice(0, 2), part.slice(2)] : [part]));
  const offsetMs = sign * ((Number(hours) * 60 + Number(minutes)) * 60 + Number(seconds)) * 1000;
  const utc = new Date(Date.parse(`${date}T${time}Z`) - offsetMs).toISOString();
  return `${utc.slice(0, 19)}.${micros}Z`;
}

/** `<iso_timestamp>` of a JavaScript time (milliseconds precision, padded to microseconds). */
export function isoTimestamp(time: Date | number = Date.now()): string {
  return `${new Date(time).toISOString().slice(0, 23)}000Z`;
}

/** `<datetime>` (`YYYY-MM-DD HH:MM:SS`, UTC) of an `<iso_timestamp>`. */
export function datetime(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}`;
}
