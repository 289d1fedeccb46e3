import { PlatformError, ValidationError } from '../../../runtime/errors.js';
import type { Markup } from '../../../runtime/calls/carriers/types.js';
import type { ApiRequest, ApiResponse } from '../../http/types.js';

/**
 * What every carrier's webhook routes share: form bodies read with bounds (anyone can post them
 * until their signature is checked), the call a status callback is about, and markup answers.
 */

/** Form fields of a carrier webhook taken (carriers send a few dozen). */
const MAX_FORM_FIELDS = 200;

/** Longest value of a carrier's form field taken (numbers, call ids, statuses are far shorter). */
const MAX_FORM_VALUE = 128;

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
