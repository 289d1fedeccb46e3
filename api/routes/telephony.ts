import { createHmac, timingSafeEqual } from 'node:crypto';
import type { VoiceService } from '../../runtime/calls/live.js';
import { PlatformError, ValidationError } from '../../runtime/errors.js';
import type { RateLimiter } from '../../runtime/rateLimit.js';
import { placeCallSchema, webCallSchema } from '../../schemas/calls.js';
import { userId } from '../http/params.js';
import { json, type ApiRequest, type RouteDefinition } from '../http/types.js';

/**
 * Starting calls: Twilio's voice webhook and status callbacks (form-encoded, answered with TwiML,
 * signed with `X-Twilio-Signature` when TWILIO_AUTH_TOKEN is set), outbound calls, and web calls.
 */

const xml = (body: string) => ({ status: 200, body, headers: { 'Content-Type': 'text/xml; charset=utf-8' } });

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

/** Form fields of a carrier webhook taken (Twilio's have a few dozen). */
const MAX_FORM_FIELDS = 200;

/** Longest value of a carrier's form field taken (numbers, SIDs, statuses are far shorter). */
const MAX_FORM_VALUE = 128;

/** A form field of a carrier webhook; one no carrier would send (too long, a null character) is a 422. */
function formField(params: URLSearchParams, name: string): string {
  const value = params.get(name) ?? '';
  if (value.length > MAX_FORM_VALUE || value.includes('\u0000')) throw ValidationError.field(name, `The ${name} field is invalid.`);
  return value;
}

export function telephonyRoutes(voice: VoiceService, options: { twilioAuthToken: string | undefined; publicUrl: () => string; perIp: RateLimiter }): RouteDefinition[] {
  function verified(req: ApiRequest): URLSearchParams {
    // Twilio sends a few dozen fields: a body of thousands is refused before it is parsed or hashed.
    for (let at = req.rawBody.indexOf(0x26), fields = 2; at !== -1; at = req.rawBody.indexOf(0x26, at + 1), fields++) {
      if (fields > MAX_FORM_FIELDS) throw new PlatformError('payload_too_large', { message: `A carrier webhook has at most ${MAX_FORM_FIELDS} form fields.` });
    }
    const params = new URLSearchParams(req.rawBody.toString('utf8'));
    if (!options.twilioAuthToken) return params;
    const url = `${options.publicUrl()}${req.path}${req.rawQuery ? `?${req.rawQuery}` : ''}`;
    const expected = Buffer.from(twilioSignature(options.twilioAuthToken, url, params));
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
        const answeredBy = formField(params, 'AnsweredBy');
        return xml(await voice.inbound({ to: formField(params, 'To'), from: formField(params, 'From'), callSid: formField(params, 'CallSid'), answeredBy: answeredBy || undefined, requestId: req.id }));
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
        const callId = Number(new URLSearchParams(req.rawQuery).get('call_id'));
        const answeredBy = formField(params, 'AnsweredBy');
        if (Number.isSafeInteger(callId) && callId > 0) voice.carrierStatus(callId, formField(params, 'CallSid'), formField(params, 'CallStatus'), answeredBy || undefined);
        return xml('<?xml version="1.0" encoding="UTF-8"?><Response/>');
      },
    },
    {
      method: 'POST',
      path: '/api/user/calls',
      auth: 'user',
      tag: 'Calls',
      summary: 'Place an outbound call with an outbound assistant that has a phone number',
      requestSchema: placeCallSchema.schema,
      successStatus: 201,
      async handler(req) {
        const input = placeCallSchema(req.body);
        const call = await voice.place(userId(req), { assistantId: input.assistant_id, phoneNumber: input.phone_number, variables: input.variables ?? {} }, req.id);
        return json(201, { message: 'Call initiated successfully', data: call });
      },
    },
    {
      method: 'POST',
      path: '/api/web-calls',
      auth: 'none',
      tag: 'Calls',
      summary: 'Start a browser call with an assistant (by its UUID); public, rate limited. Open `websocket_url` within 5 minutes',
      requestSchema: webCallSchema.schema,
      successStatus: 201,
      async handler(req) {
        const verdict = options.perIp.take(`ip:${req.ip}`);
        if (!verdict.ok) throw new PlatformError('too_many_requests', { headers: { 'Retry-After': String(verdict.retryAfterSeconds) } });
        const input = webCallSchema(req.body);
        return json(201, await voice.startWebCall(input.assistant_id, req.id));
      },
    },
  ];
}
