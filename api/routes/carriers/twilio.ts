import { createHmac, timingSafeEqual } from 'node:crypto';
import { twimlAnswer } from '../../../runtime/calls/carriers/twilio.js';
import type { VoiceService } from '../../../runtime/calls/live.js';
import { PlatformError } from '../../../runtime/errors.js';
import type { ApiRequest, RouteDefinition } from '../../http/types.js';
import { formOf, twimlWebhookRoutes, unsignedWebhook } from './webhooks.js';

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

export function twilioRoutes(voice: VoiceService, options: { authToken: string | undefined; acceptUnsigned: boolean; publicUrl: () => string }): RouteDefinition[] {
  function verified(req: ApiRequest): URLSearchParams {
    const params = formOf(req);
    if (!options.authToken) {
      unsignedWebhook('Twilio', options.acceptUnsigned);
      return params;
    }
    const url = `${options.publicUrl()}${req.path}${req.rawQuery ? `?${req.rawQuery}` : ''}`;
    const expected = Buffer.from(twilioSignature(options.authToken, url, params));
    const given = Buffer.from(req.headers['x-twilio-signature'] ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new PlatformError('forbidden', { message: 'The Twilio signature does not match.' });
    return params;
  }
  return twimlWebhookRoutes(voice, { name: 'twilio', title: 'Twilio', markup: 'TwiML', verified, answer: twimlAnswer });
}
