import { PlatformError, ValidationError } from '../../../runtime/errors.js';
import type { AnsweredBy, CarrierStatus, InboundAnswer, Markup } from '../../../runtime/calls/carriers/types.js';
import type { VoiceService } from '../../../runtime/calls/live.js';
import type { ApiRequest, ApiResponse, ResponseDoc, RouteDefinition } from '../../http/types.js';
import { media } from '../../http/contract.js';

/**
 * What a carrier's webhook answers besides its markup: 403 when its signature does not hold (or
 * the carrier is not accepted unsigned), 422 for a field no carrier would send.
 */
export const CARRIER_ERRORS = [403, 422] as const;

/** The documented answer of a webhook answered with XML markup (TwiML, TeXML, Plivo XML). */
export const xmlAnswer = (dialect: string): Readonly<Record<number, ResponseDoc>> => ({ 200: media('text/xml', `${dialect} for the carrier`) });

/**
 * What every carrier's webhook routes share: form bodies read with bounds (anyone can post them
 * until their signature is checked), the call a status callback is about, markup answers, and the
 * status words of TwiML and its dialects (Twilio's, Telnyx's TeXML).
 */

/** Form fields of a carrier webhook taken (carriers send a few dozen). */
const MAX_FORM_FIELDS = 200;

/** Longest value of a carrier's form field taken (numbers, call ids, statuses are far shorter). */
const MAX_FORM_VALUE = 128;

/**
 * Checks a webhook of a carrier whose signing secret is not set: refused (403), unless the operator
 * chose to take unsigned webhooks (ACCEPT_UNSIGNED_CARRIER_WEBHOOKS). Anyone can post to these
 * routes: taken unsigned, a post would start a call to an owner's number on their balance.
 */
export function unsignedWebhook(title: string, accepted: boolean): void {
  if (!accepted) throw new PlatformError('forbidden', { message: `${title} webhooks are not accepted by this server.` });
}

/** A form-encoded webhook body; one of thousands of fields is refused before it is parsed or hashed. */
export function formOf(req: ApiRequest): URLSearchParams {
  for (let at = req.rawBody.indexOf(0x26), fields = 2; at !== -1; at = req.rawBody.indexOf(0x26, at + 1), fields++) {
    if (fields > MAX_FORM_FIELDS) throw new PlatformError('payload_too_large', { message: `A carrier webhook has at most ${MAX_FORM_FIELDS} form fields.` });
  }
  return new URLSearchParams(req.rawBody.toString('utf8'));
}

/** A form field of a carrier webhook; one no carrier would send (too long, a null character) is a 422. */
export function formField(params: URLSearchParams, name: string): string {
  return fieldValue(name, params.get(name) ?? '');
}

/** A field of a JSON webhook body (or of a query string as an object): a string or number, else empty; checked as `formField`. */
export function jsonField(body: unknown, name: string): string {
  const value = body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
  return fieldValue(name, typeof value === 'string' ? value : typeof value === 'number' ? String(value) : '');
}

function fieldValue(name: string, value: string): string {
  if (value.length > MAX_FORM_VALUE || value.includes('\u0000')) throw ValidationError.field(name, `The ${name} field is invalid.`);
  return value;
}

/** The call a status callback is about (`?call_id=` of the URL the platform gave the carrier). */
export function statusCallId(req: ApiRequest): number | undefined {
  const callId = Number(new URLSearchParams(req.rawQuery).get('call_id'));
  return Number.isSafeInteger(callId) && callId > 0 ? callId : undefined;
}

export function markupResponse(markup: Markup): ApiResponse {
  return { status: 200, body: markup.body, headers: { 'Content-Type': markup.contentType } };
}

/** An answer to a status callback that asks nothing more of the call. */
export const EMPTY_TWIML = { contentType: 'text/xml; charset=utf-8', body: '<?xml version="1.0" encoding="UTF-8"?><Response/>' } as const satisfies Markup;

/** TwiML's `CallStatus` (Twilio's and TeXML's) in the words every carrier's comes down to. */
const TWIML_STATUSES: Readonly<Record<string, CarrierStatus>> = {
  ringing: 'ringing',
  'in-progress': 'answered',
  completed: 'completed',
  busy: 'busy',
  'no-answer': 'no-answer',
  canceled: 'canceled',
  failed: 'failed',
};

/** undefined for `queued`, `initiated` and the absent status of an answering-machine callback: nothing to act on. */
export function twimlStatus(value: string): CarrierStatus | undefined {
  return Object.hasOwn(TWIML_STATUSES, value) ? TWIML_STATUSES[value] : undefined;
}

/** TwiML's `AnsweredBy` (`human`, `machine_start`, `machine_end_beep`, ..., `fax`, `unknown`). */
export function twimlAnsweredBy(value: string): AnsweredBy | undefined {
  if (!value) return undefined;
  return /^machine|^fax/.test(value) ? 'machine' : value === 'human' ? 'human' : 'unknown';
}

export interface TwimlCarrier {
  /** The name in the paths (`/api/telephony/{name}/...`) and on the numbers, e.g. `twilio`. */
  readonly name: string;
  /** The carrier and its markup in the API's docs: `Twilio`, `TwiML`. */
  readonly title: string;
  readonly markup: string;
  /** The webhook's form once its signature holds; throws `forbidden` (403) otherwise. */
  verified(req: ApiRequest): URLSearchParams;
  answer(answer: InboundAnswer): Markup;
}

/**
 * The voice webhook and status callback of a carrier speaking TwiML or a dialect of it (Twilio's,
 * Telnyx's TeXML): form fields `To`, `From`, `CallSid`, `CallStatus` and `AnsweredBy`, answered
 * with markup.
 */
export function twimlWebhookRoutes(voice: VoiceService, carrier: TwimlCarrier): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: `/api/telephony/${carrier.name}/inbound`,
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      summary: `${carrier.title}'s voice webhook for calls to your numbers: answers ${carrier.markup} that streams the call to its inbound assistant`,
      errors: CARRIER_ERRORS,
      responses: xmlAnswer(carrier.markup),
      async handler(req) {
        const params = carrier.verified(req);
        const answer = await voice.inbound(carrier.name, { to: formField(params, 'To'), from: formField(params, 'From'), carrierCallId: formField(params, 'CallSid'), requestId: req.id });
        return markupResponse(carrier.answer(answer));
      },
    },
    {
      method: 'POST',
      path: `/api/telephony/${carrier.name}/status`,
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      summary: `${carrier.title}'s status callback (ringing, in-progress, busy, no-answer, failed, completed) and answering-machine result`,
      errors: CARRIER_ERRORS,
      responses: xmlAnswer(`An empty ${carrier.markup} document`),
      async handler(req) {
        const params = carrier.verified(req);
        const callId = statusCallId(req);
        if (callId !== undefined) await voice.carrierStatus(carrier.name, callId, formField(params, 'CallSid'), twimlStatus(formField(params, 'CallStatus')), twimlAnsweredBy(formField(params, 'AnsweredBy')));
        return markupResponse(EMPTY_TWIML);
      },
    },
  ];
}
