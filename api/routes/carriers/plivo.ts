import { createHmac, timingSafeEqual } from 'node:crypto';
import { EMPTY_PLIVO_XML, HANG_UP_XML, PLIVO_PATHS, dialXml, plivoAnswer } from '../../../runtime/calls/carriers/plivo.js';
import type { AnsweredBy, CarrierStatus } from '../../../runtime/calls/carriers/types.js';
import type { VoiceService } from '../../../runtime/calls/live.js';
import { PlatformError } from '../../../runtime/errors.js';
import { plivoFormat } from '../../../runtime/voice/serializers/plivo.js';
import type { ApiRequest, RouteDefinition } from '../../http/types.js';
import { plusNumber } from '../../../runtime/calls/carriers/rest.js';
import { CARRIER_ERRORS, formField, formOf, markupResponse, statusCallId, unsignedWebhook, xmlAnswer } from './webhooks.js';

/**
 * Plivo's webhooks, form-encoded and answered with Plivo XML: the voice webhook of inbound calls
 * (the application's answer URL), the ring, hang-up, machine-detection and stream callbacks of a
 * call, and the two documents Plivo fetches by URL (a placed call's stream, a transfer's dial).
 * When PLIVO_AUTH_TOKEN is set each must carry a valid `X-Plivo-Signature-V3` with its
 * `X-Plivo-Signature-V3-Nonce`; without it unsigned webhooks are taken (for local use only).
 */

/**
 * Plivo's V3 signature of a POST, as its SDKs check it: base64 HMAC-SHA256, keyed with the auth
 * token, of the URL without its query, then `?` and the query's parameters sorted by name as
 * `name=value` joined by `&` (values decoded; a `.` after them when the body has parameters), then
 * the body's parameters sorted by name as `namevalue`, then `.` and the nonce. A name's several
 * values go in sorted order.
 */
export function plivoSignature(authToken: string, url: string, params: URLSearchParams, nonce: string): string {
  const parsed = new URL(url);
  const query = sortedPairs(parsed.searchParams)
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
  const body = sortedPairs(params);
  let signed = `${parsed.origin}${parsed.pathname}`;
  if (query || body.length > 0) signed += `?${query}`;
  if (query && body.length > 0) signed += '.';
  // One update per pair: joining an unauthenticated body's fields into one string first is no cheaper.
  const hmac = createHmac('sha256', authToken).update(signed);
  for (const [name, value] of body) hmac.update(name + value);
  return hmac.update(`.${nonce}`).digest('base64');
}

/** Pairs sorted by name, then by value within a name (grouped in one pass: an unauthenticated body may be large). */
function sortedPairs(params: URLSearchParams): Array<[string, string]> {
  const byName = new Map<string, string[]>();
  for (const [name, value] of params) {
    const values = byName.get(name);
    if (values) values.push(value);
    else byName.set(name, [value]);
  }
  return [...byName.keys()].sort().flatMap((name) => byName.get(name)!.sort().map((value): [string, string] => [name, value]));
}

/** Plivo's `CallStatus` in the words every carrier's comes down to (`queued`: nothing to act on). */
const STATUSES: Readonly<Record<string, CarrierStatus>> = {
  ringing: 'ringing',
  'in-progress': 'answered',
  completed: 'completed',
  busy: 'busy',
  'no-answer': 'no-answer',
  timeout: 'no-answer',
  cancel: 'canceled',
  failed: 'failed',
};

/** Plivo's machine-detection verdict: `Machine` is `true` or `false` (absent from other callbacks). */
function answeredBy(machine: string): AnsweredBy | undefined {
  return machine === 'true' ? 'machine' : machine === 'false' ? 'human' : undefined;
}

export function plivoRoutes(voice: VoiceService, options: { authToken: string | undefined; acceptUnsigned: boolean; publicUrl: () => string }): RouteDefinition[] {
  function verified(req: ApiRequest): URLSearchParams {
    const params = formOf(req);
    if (!options.authToken) {
      unsignedWebhook('Plivo', options.acceptUnsigned);
      return params;
    }
    const url = `${options.publicUrl()}${req.path}${req.rawQuery ? `?${req.rawQuery}` : ''}`;
    const expected = Buffer.from(plivoSignature(options.authToken, url, params, req.headers['x-plivo-signature-v3-nonce'] ?? ''));
    // An account with several auth tokens active sends one signature per token.
    const given = (req.headers['x-plivo-signature-v3'] ?? '').split(',').map((signature) => Buffer.from(signature.trim()));
    if (!req.headers['x-plivo-signature-v3-nonce'] || !given.some((signature) => signature.length === expected.length && timingSafeEqual(signature, expected))) {
      throw new PlatformError('forbidden', { message: 'The Plivo signature does not match.' });
    }
    return params;
  }
  const statusUrl = (callId: number) => `${options.publicUrl()}${PLIVO_PATHS.status}?call_id=${callId}`;
  return [
    {
      method: 'POST',
      path: PLIVO_PATHS.inbound,
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      errors: CARRIER_ERRORS,
      responses: xmlAnswer('Plivo XML'),
      summary: "Plivo's answer URL for calls to your numbers: answers Plivo XML that streams the call to its inbound assistant",
      async handler(req) {
        const params = verified(req);
        const answer = await voice.inbound('plivo', { to: plusNumber(formField(params, 'To')), from: plusNumber(formField(params, 'From')), carrierCallId: formField(params, 'CallUUID'), requestId: req.id });
        return markupResponse(plivoAnswer(answer, answer.kind === 'stream' ? statusUrl(answer.callId) : ''));
      },
    },
    {
      method: 'POST',
      path: PLIVO_PATHS.status,
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      errors: CARRIER_ERRORS,
      responses: xmlAnswer('Plivo XML'),
      summary: "Plivo's ring, hang-up (completed, busy, no-answer, failed, ...), machine-detection and stream callbacks of a call",
      async handler(req) {
        const params = verified(req);
        const callId = statusCallId(req);
        const status = formField(params, 'CallStatus');
        // A stream's own events (`Event`: StartStream, StopStream, DroppedStream) carry no `CallStatus`: the socket tells those.
        if (callId !== undefined) await voice.carrierStatus('plivo', callId, formField(params, 'CallUUID'), Object.hasOwn(STATUSES, status) ? STATUSES[status] : undefined, answeredBy(formField(params, 'Machine')));
        return markupResponse(EMPTY_PLIVO_XML);
      },
    },
    {
      method: 'POST',
      path: PLIVO_PATHS.answer,
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      errors: CARRIER_ERRORS,
      responses: xmlAnswer('Plivo XML'),
      summary: "The answer URL of a call the platform placed through Plivo: Plivo XML that connects the answered call to its media stream",
      handler(req) {
        verified(req);
        const callId = statusCallId(req);
        const token = new URLSearchParams(req.rawQuery).get('token') ?? '';
        // The stream's socket checks the token; a URL the platform did not write gets a hang-up.
        if (callId === undefined || !/^[\w-]{1,100}$/.test(token)) return markupResponse({ contentType: EMPTY_PLIVO_XML.contentType, body: HANG_UP_XML });
        const streamUrl = `${options.publicUrl().replace(/^http/, 'ws')}${plivoFormat.path}`;
        return markupResponse(plivoAnswer({ kind: 'stream', streamUrl, callId, token }, statusUrl(callId)));
      },
    },
    {
      method: 'POST',
      path: PLIVO_PATHS.dial,
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      errors: CARRIER_ERRORS,
      responses: xmlAnswer('Plivo XML'),
      summary: "The XML a call transferred through Plivo fetches: dials the transfer's number",
      handler(req) {
        verified(req);
        const number = new URLSearchParams(req.rawQuery).get('number') ?? '';
        const body = /^\+[1-9]\d{5,14}$/.test(number) ? dialXml(number) : HANG_UP_XML;
        return markupResponse({ contentType: EMPTY_PLIVO_XML.contentType, body });
      },
    },
  ];
}
