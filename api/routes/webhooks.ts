import type { WebhookService } from '../../runtime/webhooks/service.js';
import { deliveriesQuerySchema } from '../../schemas/webhooks.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { array, dataOf, isoTimestamp, message, nullable, object, string } from '../../schemas/shapes.js';
import { webhookDelivery } from '../../schemas/responses.js';

const secret = body(
  dataOf(
    object(
      {
        secret: string('The signing secret: whsec_ and the base64 of its 32 key bytes (Standard Webhooks)'),
        previous_secret_expires_at: nullable(isoTimestamp('Until when the secret replaced by the last rotation also signs; null when none does')),
      },
      'The secret',
    ),
    'The webhook signing secret',
  ),
);

const tag = 'Webhooks';

export function webhookRoutes(webhooks: WebhookService): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/api/user/webhook-secret',
      auth: 'user',
      tag,
      summary: 'The secret that signs your webhooks (Standard Webhooks `webhook-signature`), and when a rotated-out one stops signing',
      responses: { 200: secret },
      async handler(req) {
        return json(200, { data: await webhooks.secret(userId(req)) });
      },
    },
    {
      method: 'POST',
      path: '/api/user/webhook-secret/rotate',
      auth: 'user',
      tag,
      summary: 'Replace the webhook signing secret; the replaced one also signs until previous_secret_expires_at (WEBHOOK_SECRET_OVERLAP_HOURS)',
      responses: { 200: secret },
      async handler(req) {
        return json(200, { data: await webhooks.rotateSecret(userId(req)) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/webhook-deliveries',
      auth: 'user',
      tag,
      summary: 'Webhook deliveries and their last attempt, newest first',
      querySchema: deliveriesQuerySchema.schema,
      responses: { 200: body(dataOf(array(webhookDelivery, 'Newest first, at most 100'), 'Deliveries')) },
      async handler(req) {
        const query = deliveriesQuerySchema(req.query);
        return json(200, { data: await webhooks.deliveries(userId(req), { callId: query.call_id, status: query.status }) });
      },
    },
    {
      method: 'POST',
      path: '/api/user/webhook-deliveries/:id/redeliver',
      auth: 'user',
      tag,
      summary: 'Send a delivery again (same webhook-id and body)',
      responses: { 200: body(message('Queued')) },
      async handler(req) {
        await webhooks.redeliver(userId(req), idParam(req, 'id', 'webhook_delivery_not_found'));
        return json(200, { message: 'Delivery queued.' });
      },
    },
  ];
}
