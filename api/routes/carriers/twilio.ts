import { twimlAnswer } from '../../../runtime/calls/carriers/twilio.js';
import { twilioSignatureMatches } from '../../../runtime/calls/carriers/twilioSignature.js';
import type { VoiceService } from '../../../runtime/calls/live.js';
import { PlatformError } from '../../../runtime/errors.js';
import type { ApiRequest, RouteDefinition } from '../../http/types.js';
import { formOf, twimlWebhookRoutes, unsignedWebhook } from './webhooks.js';

/**
 * Twilio's voice webhook and status callbacks: form-encoded, answered with TwiML, signed with
 * `X-Twilio-Signature` when TWILIO_AUTH_TOKEN is set.
 */

export { twilioSignature } from '../../../runtime/calls/carriers/twilioSignature.js';

export interface TwilioWebhookOptions {
  readonly authToken: string | undefined;
  readonly acceptUnsigned: boolean;
  readonly publicUrl: () => string;
}

/** A Twilio webhook's form, once its `X-Twilio-Signature` holds (403 otherwise; see `unsignedWebhook` without a token). */
export function twilioVerifier(options: TwilioWebhookOptions): (req: ApiRequest) => URLSearchParams {
  return (req) => {
    const params = formOf(req);
    if (!options.authToken) {
      unsignedWebhook('Twilio', options.acceptUnsigned);
      return params;
    }
    const url = `${options.publicUrl()}${req.path}${req.rawQuery ? `?${req.rawQuery}` : ''}`;
    if (!twilioSignatureMatches(options.authToken, url, params, req.headers['x-twilio-signature'])) throw new PlatformError('forbidden', { message: 'The Twilio signature does not match.' });
    return params;
  };
}

export function twilioRoutes(voice: VoiceService, options: TwilioWebhookOptions): RouteDefinition[] {
  return twimlWebhookRoutes(voice, { name: 'twilio', title: 'Twilio', markup: 'TwiML', verified: twilioVerifier(options), answer: twimlAnswer });
}
