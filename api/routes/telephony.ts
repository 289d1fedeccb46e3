import type { VoiceService } from '../../runtime/calls/live.js';
import { PlatformError } from '../../runtime/errors.js';
import type { RateLimiter } from '../../runtime/rateLimit.js';
import { placeCallSchema, webCallSchema } from '../../schemas/calls.js';
import { userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { constant, integer, messageWith, object, string } from '../../schemas/shapes.js';

/**
 * Starting calls from the API: outbound calls and web calls. (Carriers' webhooks are in
 * `carriers/`, one file per carrier.)
 */

export function telephonyRoutes(voice: VoiceService, options: { perIp: RateLimiter }): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/calls',
      auth: 'user',
      tag: 'Calls',
      summary: 'Place an outbound call with an outbound assistant that has a phone number',
      requestSchema: placeCallSchema.schema,
      errors: [402],
      responses: { 201: body(messageWith(object({ id: integer('Call id (GET /user/calls/{id})'), status: constant('initiated', 'The call is being placed') }, 'The call'), 'The call is being placed')) },
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
      errors: [402, 404, 429],
      responses: {
        201: body(object({ call_id: integer('Call id'), websocket_url: string('The ws(s):// URL the browser opens within 5 minutes (see x-websockets)'), token: string('The one-time token in that URL') }, 'Where the browser connects')),
      },
      async handler(req) {
        const verdict = options.perIp.take(`ip:${req.ip}`);
        if (!verdict.ok) throw new PlatformError('too_many_requests', { headers: { 'Retry-After': String(verdict.retryAfterSeconds) } });
        const input = webCallSchema(req.body);
        return json(201, await voice.startWebCall(input.assistant_id, req.id));
      },
    },
  ];
}
