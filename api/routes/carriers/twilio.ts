import { createHmac, timingSafeEqual } from 'node:crypto';
import { twimlAnswer } from '../../../runtime/calls/carriers/twilio.js';
import type { AnsweredBy, CarrierStatus } from '../../../runtime/calls/carriers/types.js';
import type { VoiceService } from '../../../runtime/calls/live.js';
import { PlatformError } from '../../../runtime/errors.js';
import type { ApiRequest, RouteDefinition } from '../../http/types.js';
import { formField, formOf, markupResponse, statusCallId } from './webhooks.js';

/**
 * Twilio's voice webhook and status callbacks: form-encoded, answered with TwiML, signed with
 * `X-Twilio-Signature` when TWILIO_AUTH_TOKEN is set.
 */

/** Twilio's request signature: base64 HMAC-SHA1 of the full URL followed by each POST parameter's name and value, sorted by name. */
export function twilioSignature(authToken: string, url: string, params: URLSearchParams): string {
  // Grouped in one pass: getAll per name scans every pair, quadratic in an unauthenticated body's fields.
  const byName = new Map<string, string[]>();
  for (const [name, value] of params) {
    const values = byName.get(name);
    if (values) values.push(value);
    else byName.set(name, [value]);
  }
  const hmac = createHmac('sha1', authToken).update(url);
  for (const name of [...byName.keys()].sort()) for (const value of byName.get(name)!) hmac.update(name + value);
  return hmac.digest('base64');
}

/** Twilio's `CallStatus` in the words every carrier's comes down to (`queued`, `initiated`: nothing to act on). */
const STATUSES: Readonly<Record<string, CarrierStatus>> = {
  ringing: 'ringing',
  'in-progress': 'answered',
  completed: 'completed',
  busy: 'busy',
  'no-answer': 'no-answer',
  canceled: 'canceled',
  failed: 'failed',
};

/** Twilio's `AnsweredBy` (`human`, `machine_start`, `machine_end_beep`, ..., `fax`, `unknown`). */
function answeredBy(value: string): AnsweredBy | undefined {
  if (!value) return undefined;
  return /^machine|^fax/.test(value) ? 'machine' : value === 'human' ? 'human' : 'unknown';
}

export function twilioRoutes(voice: VoiceService, options: { authToken: string | undefined; publicUrl: () => string }): RouteDefinition[] {
  function verified(req: ApiRequest): URLSearchParams {
    const params = formOf(req);
    if (!options.authToken) return params;
    const url = `${options.publicUrl()}${req.path}${req.rawQuery ? `?${req.rawQuery}` : ''}`;
    const expected = Buffer.from(twilioSignature(options.authToken, url, params));
    const given = Buffer.from(req.headers['x-twilio-signature'] ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new PlatformError('forbidden', { message: 'The Twilio signature does not match.' });
    return params;
  }
  return [
    {
      method: 'POST',
      path: '/api/telephony/twilio/inbound',
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      summary: "Twilio's voice webhook for calls to your numbers: answers TwiML that streams the call to its inbound assistant",
      async handler(req) {
        const params = verified(req);
        const answer = await voice.inbound('twilio', { to: formField(params, 'To'), from: formField(params, 'From'), carrierCallId: formField(params, 'CallSid'), requestId: req.id });
        return markupResponse(twimlAnswer(answer));
      },
    },
    {
      method: 'POST',
      path: '/api/telephony/twilio/status',
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      summary: "Twilio's status callback (ringing, in-progress, busy, no-answer, failed, completed) and answering-machine result",
      handler(req) {
        const params = verified(req);
        const callId = statusCallId(req);
        if (callId !== undefined) voice.carrierStatus('twilio', callId, formField(params, 'CallSid'), STATUSES[formField(params, 'CallStatus')], answeredBy(formField(params, 'AnsweredBy')));
        return markupResponse({ contentType: 'text/xml; charset=utf-8', body: '<?xml version="1.0" encoding="UTF-8"?><Response/>' });
      },
    },
  ];
}
