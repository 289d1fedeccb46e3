import type { FunctionDefinition } from '../../llm/types.js';
import { OutboundError, type OutboundFetch } from '../../net/outbound.js';
import { DTMF_KEY_PATTERN } from '../audio.js';

/**
 * The built-in tools of spec 2.6 as model functions. Each returns what the model is told, and an
 * effect the call carries out after the answer is spoken (end, transfer) or at once (keypad tones).
 * - `end_call` → the goodbye is played, then the call ends `ended_by_assistant`.
 * - `call_transfer` → `transfer_call`; with `custom` the model gives the number. Transfers are
 *   offered Monday to Friday, 09:00-17:00 in the tool's `timezone` (else the assistant's); outside
 *   those hours the model is told transfer is unavailable.
 * - `dtmf_input` → `send_dtmf`: the tones of the keys are played into the call.
 * - `calendar_integration` → `check_availability` and `book_appointment` on the Cal.com v2 API.
 */

export type BuiltinEffect = { type: 'end_call' } | { type: 'transfer'; number: string } | { type: 'dtmf'; digits: string };

export interface BuiltinContext {
  readonly tools: ReadonlyArray<Record<string, unknown>>;
  readonly timezone: string;
  readonly outbound: OutboundFetch;
  /** Cal.com API origin. @defaultValue https://api.cal.com */
  readonly calendarBaseUrl: string;
  /** The owner and the call, named in the log when the guard refuses the calendar's address. */
  readonly subject?: Readonly<Record<string, number>>;
}

export interface Builtin {
  readonly definition: FunctionDefinition;
  run(args: Record<string, unknown>, at: { now: number }): Promise<{ result: unknown; effect?: BuiltinEffect }>;
}

const E164 = /^\+[1-9]\d{6,14}$/;

/** Whether `now` falls in business hours (Mon-Fri 09:00-17:00) in `timezone`. */
export function withinBusinessHours(now: number, timezone: string): boolean {
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat('en-US', { timeZone: timezone, weekday: 'short', hour: 'numeric', hourCycle: 'h23' }).formatToParts(now);
  } catch {
    parts = new Intl.DateTimeFormat('en-US', { timeZone: 'UTC', weekday: 'short', hour: 'numeric', hourCycle: 'h23' }).formatToParts(now);
  }
  const weekday = parts.find((p) => p.type === 'weekday')?.value ?? '';
  const hour = Number(parts.find((p) => p.type === 'hour')?.value ?? 0);
  return !['Sat', 'Sun'].includes(weekday) && hour >= 9 && hour < 17;
}

function text(value: unknown, fallback: string): string {
  return typeof value === 'string' && value.trim() !== '' ? value : fallback;
}

export function builtinFunctions(context: BuiltinContext): Builtin[] {
  const out: Builtin[] = [];
  for (const tool of context.tools) {
    switch (tool.type) {
      case 'end_call':
        out.push({
          definition: { name: 'end_call', description: text(tool.description, 'End the call when the conversation is complete or the caller wants to hang up.'), parameters: { type: 'object', properties: {} } },
          async run() {
            return { result: { ok: true, instruction: 'Say a short goodbye now; the call ends after it.' }, effect: { type: 'end_call' } };
          },
        });
        break;
      case 'call_transfer': {
        const custom = tool.custom === true;
        const timezone = text(tool.timezone, context.timezone);
        out.push({
          definition: {
            name: 'transfer_call',
            description: text(tool.description, 'Transfer the caller to a human colleague.'),
            parameters: custom
              ? { type: 'object', properties: { phone_number: { type: 'string', description: 'Number to transfer to, in E.164 form (+4930...)' } }, required: ['phone_number'] }
              : { type: 'object', properties: {} },
          },
          async run(args, { now }) {
            if (!withinBusinessHours(now, timezone)) return { result: { ok: false, error: 'Transfer is unavailable outside business hours (Monday to Friday, 9:00 to 17:00). Offer to help otherwise.' } };
            const number = custom && typeof args.phone_number === 'string' ? args.phone_number.replace(/[\s()-]/g, '') : String(tool.phone_number ?? '');
            if (!E164.test(number)) return { result: { ok: false, error: 'That is not a valid phone number in E.164 form.' } };
            return { result: { ok: true, instruction: 'Tell the caller you are transferring them now.' }, effect: { type: 'transfer', number } };
          },
        });
        break;
      }
      case 'dtmf_input':
        out.push({
          definition: {
            name: 'send_dtmf',
            description: text(tool.description, 'Press keys on the phone keypad, for example to navigate a phone menu.'),
            parameters: { type: 'object', properties: { digits: { type: 'string', description: 'Keys to press: 0-9, * and #' } }, required: ['digits'] },
          },
          async run(args) {
            const digits = String(args.digits ?? '').replace(/\s/g, '');
            if (!DTMF_KEY_PATTERN.test(digits) || digits.length > 32) return { result: { ok: false, error: 'Keys must be 0-9, *, # or A-D.' } };
            return { result: { ok: true, pressed: digits }, effect: { type: 'dtmf', digits } };
          },
        });
        break;
      case 'calendar_integration':
        out.push(...calendarFunctions(context, String(tool.calendar_api_key ?? ''), String(tool.calendar_event_slug ?? ''), text(tool.description, 'Offer and book appointments.')));
        break;
      default:
    }
  }
  return out;
}

function calendarFunctions(context: BuiltinContext, apiKey: string, slug: string, description: string): Builtin[] {
  const base = context.calendarBaseUrl.replace(/\/+$/, '');
  let username: Promise<string> | undefined;
  const call = async (path: string, version: string, init: { method?: string; body?: unknown } = {}): Promise<{ status: number; body: any }> => {
    const response = await context.outbound(`${base}${path}`, {
      method: init.method ?? 'GET',
      headers: { authorization: `Bearer ${apiKey}`, 'cal-api-version': version, 'content-type': 'application/json', accept: 'application/json' },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      timeoutMs: 10_000,
      maxBytes: 256 * 1024,
      subject: context.subject && { ...context.subject, tool: 'calendar_integration' },
    });
    let body: unknown = null;
    try {
      body = JSON.parse(response.body.toString('utf8'));
    } catch {
      body = null;
    }
    return { status: response.status, body };
  };
  const owner = () => {
    username ??= call('/v2/me', '2024-08-13').then((r) => {
      if (r.status !== 200 || typeof r.body?.data?.username !== 'string') throw new OutboundError('The calendar did not accept the API key', false);
      return r.body.data.username as string;
    });
    username.catch(() => (username = undefined));
    return username;
  };
  const failure = (error: unknown) => ({ result: { ok: false, error: error instanceof OutboundError ? error.message : 'The calendar could not be reached.' } });
  return [
    {
      definition: {
        name: 'check_availability',
        description: `${description} Lists free appointment times on a day.`,
        parameters: { type: 'object', properties: { date: { type: 'string', description: 'Day to check, YYYY-MM-DD' }, time_zone: { type: 'string', description: 'IANA time zone of the caller' } }, required: ['date'] },
      },
      async run(args) {
        const date = String(args.date ?? '');
        if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) return { result: { ok: false, error: 'The date must be YYYY-MM-DD.' } };
        try {
          const user = await owner();
          const end = new Date(Date.parse(`${date}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
          const query = new URLSearchParams({ eventTypeSlug: slug, username: user, start: date, end, timeZone: String(args.time_zone ?? context.timezone) });
          const response = await call(`/v2/slots?${query}`, '2024-09-04');
          if (response.status !== 200) return { result: { ok: false, error: `The calendar answered HTTP ${response.status}.` } };
          const days = (response.body?.data ?? {}) as Record<string, Array<{ start: string }>>;
          return { result: { ok: true, slots: Object.values(days).flat().map((slot) => slot.start) } };
        } catch (error) {
          return failure(error);
        }
      },
    },
    {
      definition: {
        name: 'book_appointment',
        description: `${description} Books an appointment at a free time.`,
        parameters: {
          type: 'object',
          properties: {
            start: { type: 'string', description: 'Start time, ISO 8601 in UTC' },
            name: { type: 'string', description: "Caller's name" },
            email: { type: 'string', description: "Caller's email address" },
            time_zone: { type: 'string', description: 'IANA time zone of the caller' },
          },
          required: ['start', 'name', 'email'],
        },
      },
      async run(args) {
        const start = String(args.start ?? '');
        if (Number.isNaN(Date.parse(start))) return { result: { ok: false, error: 'The start time must be an ISO 8601 time.' } };
        try {
          const user = await owner();
          const response = await call('/v2/bookings', '2024-08-13', {
            method: 'POST',
            body: { start: new Date(start).toISOString(), eventTypeSlug: slug, username: user, attendee: { name: String(args.name ?? ''), email: String(args.email ?? ''), timeZone: String(args.time_zone ?? context.timezone) } },
          });
          if (response.status !== 200 && response.status !== 201) return { result: { ok: false, error: response.body?.error?.message ?? `The calendar answered HTTP ${response.status}.` } };
          return { result: { ok: true, booking: { uid: response.body?.data?.uid, start: response.body?.data?.start } } };
        } catch (error) {
          return failure(error);
        }
      },
    },
  ];
}
