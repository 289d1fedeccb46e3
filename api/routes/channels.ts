import type { Channels } from '../../runtime/channels/index.js';
import { SMS_STATUS_PATH } from '../../runtime/channels/index.js';
import { WEBHOOK_PATHS } from '../../runtime/channels/service.js';
import { PlatformError } from '../../runtime/errors.js';
import { channelResponse, createChannelSchema, updateChannelSchema } from '../../schemas/channels.js';
import { array, dataOf, message, messageWith } from '../../schemas/shapes.js';
import { body, media } from '../http/contract.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { EMPTY_TWIML, markupResponse } from './carriers/webhooks.js';
import { twilioVerifier, type TwilioWebhookOptions } from './carriers/twilio.js';

const tag = 'Channels';

/** The owners' channel settings: `/user/channels`. */
function settingsRoutes(channels: Channels): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/channels',
      auth: 'user',
      tag,
      summary: 'Connect a WhatsApp Business number or one of your SMS numbers to an assistant of yours (one channel per number); secrets are stored encrypted and never shown',
      requestSchema: createChannelSchema.schema,
      responses: { 201: body(messageWith(channelResponse, 'The new channel')) },
      async handler(req) {
        return json(201, { message: 'Channel created successfully', data: await channels.service.create(userId(req), createChannelSchema(req.body)) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/channels',
      auth: 'user',
      tag,
      summary: 'Your channels, oldest first',
      responses: { 200: body(dataOf(array(channelResponse, 'Your channels'), 'Your channels')) },
      async handler(req) {
        return json(200, { data: await channels.service.list(userId(req)) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/channels/:id',
      auth: 'user',
      tag,
      summary: 'One of your channels',
      responses: { 200: body(dataOf(channelResponse, 'The channel')) },
      async handler(req) {
        return json(200, { data: await channels.service.get(userId(req), idParam(req, 'id', 'channel_not_found')) });
      },
    },
    {
      method: 'PUT',
      path: '/api/user/channels/:id',
      auth: 'user',
      tag,
      summary: 'Change a channel: its assistant, number or secrets (fields left out are kept; the type is fixed)',
      requestSchema: updateChannelSchema.schema,
      responses: { 200: body(messageWith(channelResponse, 'The channel as it is now')) },
      async handler(req) {
        const id = idParam(req, 'id', 'channel_not_found');
        return json(200, { message: 'Channel updated successfully', data: await channels.service.update(userId(req), id, updateChannelSchema(req.body)) });
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/channels/:id',
      auth: 'user',
      tag,
      summary: "Disconnect a channel: its number's messages are no longer answered; its conversations stay listed",
      responses: { 200: body(message('Deleted')) },
      async handler(req) {
        await channels.service.remove(userId(req), idParam(req, 'id', 'channel_not_found'));
        return json(200, { message: 'Channel deleted successfully' });
      },
    },
  ];
}

/** The channels' webhooks: Meta's (WhatsApp Cloud API) and Twilio's (Messaging). Public; each checks its signature. */
function webhookRoutes(channels: Channels, twilio: TwilioWebhookOptions): RouteDefinition[] {
  const verified = twilioVerifier(twilio);
  return [
    {
      method: 'GET',
      path: WEBHOOK_PATHS.whatsapp,
      auth: 'none',
      tag,
      summary: "Meta's webhook verification: hub.challenge echoed when hub.verify_token is a channel's (403 otherwise)",
      errors: [403],
      responses: { 200: media('text/plain', 'hub.challenge, as sent') },
      async handler(req) {
        const query = new URLSearchParams(req.rawQuery);
        const challenge = await channels.receiving.whatsappChallenge(query.get('hub.mode') ?? undefined, query.get('hub.verify_token') ?? undefined, query.get('hub.challenge') ?? undefined);
        if (challenge === null) throw new PlatformError('forbidden', { message: 'The verify token is not a channel\'s.' });
        // Echoed as sent (Meta's is digits): as plain text no browser may take for a page.
        return { status: 200, body: challenge, headers: { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' } };
      },
    },
    {
      method: 'POST',
      path: WEBHOOK_PATHS.whatsapp,
      auth: 'none',
      tag,
      duringStop: true,
      summary: "WhatsApp Cloud API notifications (messages and statuses), signed with X-Hub-Signature-256 by the channel's app secret (401 otherwise)",
      errors: [401],
      responses: { 200: media('text/plain', 'OK: the notification is kept') },
      async handler(req) {
        await channels.receiving.whatsappNotification(req.rawBody, req.headers['x-hub-signature-256']);
        return { status: 200, body: 'OK', headers: { 'Content-Type': 'text/plain; charset=utf-8' } };
      },
    },
    {
      method: 'POST',
      path: WEBHOOK_PATHS.sms,
      auth: 'none',
      tag,
      duringStop: true,
      summary: "Twilio Messaging's incoming SMS (the number's A MESSAGE COMES IN webhook), signed with X-Twilio-Signature; replies are sent with the Messages API",
      errors: [403],
      responses: { 200: media('text/xml', 'An empty TwiML document') },
      async handler(req) {
        await channels.receiving.sms(verified(req));
        return markupResponse(EMPTY_TWIML);
      },
    },
    {
      method: 'POST',
      path: SMS_STATUS_PATH,
      auth: 'none',
      tag,
      duringStop: true,
      summary: "Twilio Messaging's status callback for an SMS a channel sent, signed with X-Twilio-Signature",
      errors: [403],
      responses: { 200: media('text/xml', 'An empty TwiML document') },
      async handler(req) {
        await channels.receiving.smsStatus(verified(req));
        return markupResponse(EMPTY_TWIML);
      },
    },
  ];
}

export function channelRoutes(channels: Channels, twilio: TwilioWebhookOptions): RouteDefinition[] {
  return [...settingsRoutes(channels), ...webhookRoutes(channels, twilio)];
}
