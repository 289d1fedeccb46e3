import { isTimezone } from '../assistants/rules.js';

/**
 * A campaign's weekly calling window: the days of the week and the local times between which new
 * calls start, in the schedule's IANA time zone (its clock as people there read it, summer time
 * included). The start is inclusive and the end exclusive: a window of 09:00-17:00 starts calls
 * from 09:00:00 up to 16:59:59. A call already live at the end goes on to its own end.
 *
 * An end at or before the start runs past midnight: 22:00-06:00 on `mon` is Monday 22:00 to
 * Tuesday 06:00 (and 09:00-09:00 is 24 hours from 09:00). The window belongs to the day it opens on.
 */

export const WEEK_DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;
export type WeekDay = (typeof WEEK_DAYS)[number];

export interface CallingWindow {
  readonly timezone: string;
  readonly days: readonly WeekDay[];
  /** `HH:MM`, 24-hour local time. */
  readonly startTime: string;
  readonly endTime: string;
}

/** What a schedule omits: Monday to Friday, 09:00 to 17:00, in the assistant's time zone. */
export const DEFAULT_WINDOW = { days: ['mon', 'tue', 'wed', 'thu', 'fri'], startTime: '09:00', endTime: '17:00' } as const satisfies Omit<CallingWindow, 'timezone'>;

const HH_MM = /^([01]\d|2[0-3]):([0-5]\d)$/;

/** Minutes since local midnight of an `HH:MM`; undefined when it is not one. */
function minutesOf(time: string): number | undefined {
  const match = HH_MM.exec(time);
  return match ? Number(match[1]) * 60 + Number(match[2]) : undefined;
}

/**
 * The window a stored schedule (`campaigns.schedule`, `{timezone, days, start_time, end_time}`)
 * describes, each missing or unreadable part taken from {@link DEFAULT_WINDOW} and the time zone
 * from `fallbackTimezone` (the assistant's).
 */
export function windowOf(schedule: unknown, fallbackTimezone: string): CallingWindow {
  const raw = (schedule !== null && typeof schedule === 'object' ? schedule : {}) as Record<string, unknown>;
  const timezone = typeof raw.timezone === 'string' && isTimezone(raw.timezone) ? raw.timezone : fallbackTimezone;
  const days = Array.isArray(raw.days) ? raw.days.filter((day): day is WeekDay => WEEK_DAYS.includes(day as WeekDay)) : [...DEFAULT_WINDOW.days];
  const time = (value: unknown, fallback: string) => (typeof value === 'string' && minutesOf(value) !== undefined ? value : fallback);
  return { timezone, days, startTime: time(raw.start_time, DEFAULT_WINDOW.startTime), endTime: time(raw.end_time, DEFAULT_WINDOW.endTime) };
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The weekday and minutes since midnight at `at` (ms since the epoch) on the clocks of `timezone`. */
export function localTime(at: number, timezone: string): { day: WeekDay; minutes: number } {
  let format = formatters.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone: timezone, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    formatters.set(timezone, format);
  }
  let day: WeekDay = 'sun';
  let hour = 0;
  let minute = 0;
  for (const part of format.formatToParts(at)) {
    if (part.type === 'weekday') day = part.value.toLowerCase().slice(0, 3) as WeekDay;
    else if (part.type === 'hour') hour = Number(part.value);
    else if (part.type === 'minute') minute = Number(part.value);
  }
  return { day, minutes: hour * 60 + minute };
}

/** Whether a new call may start at `at` (ms since the epoch) in `window`. */
export function insideWindow(window: CallingWindow, at: number): boolean {
  const start = minutesOf(window.startTime);
  const end = minutesOf(window.endTime);
  if (start === undefined || end === undefined || window.days.length === 0) return false;
  const { day, minutes } = localTime(at, window.timezone);
  if (start < end) return window.days.includes(day) && minutes >= start && minutes < end;
  // Past midnight: the evening of a listed day, or the small hours after one.
  const yesterday = WEEK_DAYS[(WEEK_DAYS.indexOf(day) + 6) % 7]!;
  return (window.days.includes(day) && minutes >= start) || (window.days.includes(yesterday) && minutes < end);
}
