/**
 * A campaign's calling window, in its time zone:
 * 1. days and times: Monday to Friday 09:00-17:00 UTC opens at 09:00:00, is shut at 17:00:00 (the
 *    end is exclusive) and all weekend.
 * 2. time zones: 09:00-17:00 in America/New_York and Asia/Tokyo is read on those clocks, the
 *    weekday included (Monday in Tokyo is still Sunday in UTC).
 * 3. summer time: the same local hours hold on both sides of New York's and Berlin's changes (the
 *    UTC hours move), and on the day of the change itself.
 * 4. a window past midnight (22:00-02:00) belongs to the day it opens on.
 * 5. a schedule's missing or unreadable parts take the defaults (Monday to Friday, 09:00-17:00,
 *    the assistant's time zone); an empty list of days never opens.
 */
import t from 'tap';
import { insideWindow, localTime, windowOf, type CallingWindow } from '../runtime/campaigns/window.js';

const at = (iso: string) => Date.parse(iso);
const weekdays = (timezone: string, startTime = '09:00', endTime = '17:00'): CallingWindow => ({ timezone, days: ['mon', 'tue', 'wed', 'thu', 'fri'], startTime, endTime });

t.test('days and times, start inclusive and end exclusive', async (t) => {
  const w = weekdays('UTC');
  // 2026-11-23 is a Monday.
  t.notOk(insideWindow(w, at('2026-11-23T08:59:59Z')), 'a second before the start');
  t.ok(insideWindow(w, at('2026-11-23T09:00:00Z')), 'at the start');
  t.ok(insideWindow(w, at('2026-11-23T16:59:59Z')), 'the last second');
  t.notOk(insideWindow(w, at('2026-11-23T17:00:00Z')), 'at the end');
  t.ok(insideWindow(w, at('2026-11-27T12:00:00Z')), 'Friday');
  t.notOk(insideWindow(w, at('2026-11-28T12:00:00Z')), 'Saturday');
  t.notOk(insideWindow(w, at('2026-11-29T12:00:00Z')), 'Sunday');
  t.ok(insideWindow({ ...w, days: ['sat'] }, at('2026-11-28T12:00:00Z')), 'Saturday when listed');
});

t.test('time zones: the local clock and the local weekday', async (t) => {
  const ny = weekdays('America/New_York');
  // EST is UTC-5 in November.
  t.notOk(insideWindow(ny, at('2026-11-23T13:59:00Z')), '08:59 in New York');
  t.ok(insideWindow(ny, at('2026-11-23T14:00:00Z')), '09:00 in New York');
  t.ok(insideWindow(ny, at('2026-11-23T21:59:00Z')), '16:59 in New York');
  t.notOk(insideWindow(ny, at('2026-11-23T22:00:00Z')), '17:00 in New York');
  const tokyo = weekdays('Asia/Tokyo');
  t.same(localTime(at('2026-11-23T00:30:00Z'), 'Asia/Tokyo'), { day: 'mon', minutes: 9 * 60 + 30 });
  t.ok(insideWindow(tokyo, at('2026-11-23T00:30:00Z')), 'Monday 09:30 in Tokyo (Monday 00:30 UTC)');
  t.notOk(insideWindow(tokyo, at('2026-11-22T23:30:00Z')), 'Monday 08:30 in Tokyo (Sunday in UTC): not yet');
  t.notOk(insideWindow(tokyo, at('2026-11-28T01:00:00Z')), 'Saturday 10:00 in Tokyo (Saturday in UTC too)');
  t.notOk(insideWindow(tokyo, at('2026-11-21T01:00:00Z')), 'Saturday in Tokyo');
  t.ok(insideWindow(tokyo, at('2026-11-20T01:00:00Z')), 'Friday in Tokyo');
});

t.test('summer time: the local hours hold across the changes', async (t) => {
  const ny = weekdays('America/New_York');
  // EDT (UTC-4) before 2026-11-01, EST (UTC-5) after.
  t.ok(insideWindow(ny, at('2026-10-30T13:00:00Z')), 'Friday 09:00 EDT');
  t.notOk(insideWindow(ny, at('2026-11-02T13:00:00Z')), 'Monday 08:00 EST: the same UTC hour is before the start now');
  t.ok(insideWindow(ny, at('2026-11-02T14:00:00Z')), 'Monday 09:00 EST');
  t.notOk(insideWindow(ny, at('2026-10-30T21:00:00Z')), 'Friday 17:00 EDT');
  t.ok(insideWindow(ny, at('2026-11-02T21:00:00Z')), 'Monday 16:00 EST');
  // Spring: 2026-03-08, 02:00 EST -> 03:00 EDT. A Sunday window from 01:00 to 04:00 is open on both sides of the gap.
  const night: CallingWindow = { timezone: 'America/New_York', days: ['sun'], startTime: '01:00', endTime: '04:00' };
  t.ok(insideWindow(night, at('2026-03-08T06:30:00Z')), '01:30 EST');
  t.ok(insideWindow(night, at('2026-03-08T07:30:00Z')), '03:30 EDT (02:30 never happens)');
  t.notOk(insideWindow(night, at('2026-03-08T08:00:00Z')), '04:00 EDT');
  const berlin = weekdays('Europe/Berlin');
  // CEST (UTC+2) until 2026-10-25, CET (UTC+1) after.
  t.ok(insideWindow(berlin, at('2026-10-23T07:00:00Z')), 'Friday 09:00 CEST');
  t.notOk(insideWindow(berlin, at('2026-10-26T07:00:00Z')), 'Monday 08:00 CET');
  t.ok(insideWindow(berlin, at('2026-10-26T08:00:00Z')), 'Monday 09:00 CET');
});

t.test('a window past midnight belongs to the day it opens on', async (t) => {
  const late: CallingWindow = { timezone: 'UTC', days: ['mon'], startTime: '22:00', endTime: '02:00' };
  t.notOk(insideWindow(late, at('2026-11-23T21:59:00Z')), 'Monday 21:59');
  t.ok(insideWindow(late, at('2026-11-23T22:00:00Z')), 'Monday 22:00');
  t.ok(insideWindow(late, at('2026-11-24T01:59:00Z')), 'Tuesday 01:59, the night of Monday');
  t.notOk(insideWindow(late, at('2026-11-24T02:00:00Z')), 'Tuesday 02:00');
  t.notOk(insideWindow(late, at('2026-11-23T01:00:00Z')), 'Monday 01:00, the night of Sunday (not listed)');
  t.notOk(insideWindow(late, at('2026-11-24T22:30:00Z')), 'Tuesday 22:30 (not listed)');
});

t.test("a schedule's missing parts take the defaults", async (t) => {
  t.same(windowOf({}, 'Europe/Paris'), { timezone: 'Europe/Paris', days: ['mon', 'tue', 'wed', 'thu', 'fri'], startTime: '09:00', endTime: '17:00' });
  t.same(windowOf({ timezone: 'Nowhere/Land', days: ['sat', 'xyz'], start_time: '25:00', end_time: '18:30' }, 'UTC'), { timezone: 'UTC', days: ['sat'], startTime: '09:00', endTime: '18:30' });
  t.same(windowOf(null, 'UTC').days, ['mon', 'tue', 'wed', 'thu', 'fri']);
  t.notOk(insideWindow({ timezone: 'UTC', days: [], startTime: '00:00', endTime: '23:59' }, at('2026-11-23T12:00:00Z')), 'no day listed: never open');
});
