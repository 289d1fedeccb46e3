import type { WebhookService } from '../../runtime/webhooks/service.js';
import { deliveriesQuerySchema } from '../../schemas/webhooks.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { array, dataOf, message, object, string } from '../../schemas/shapes.js';
import { webhookDelivery } from '../../schemas/responses.js';

const secret = body(dataOf(object({ secret: string('The signing secret') }, 'The secret'), 'The webhook signing secret'));

const tag = 'Webhooks';

export function webhookRoutes(webhooks: WebhookService): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/api/user/webhook-secret',
      auth: 'user',
      tag,
      summary: 'The secret that signs your webhooks (X-Webhook-Signature)',
      responses: { 200: secret },
      async handler(req) {
        return json(200, { data: { secret: await webhooks.secret(userId(req)) } });
      },
    },
    {
      method: 'POST',
      path: '/api/user/webhook-secret/rotate',
      auth: 'user',
      tag,
      summary: 'Replace the webhook signing secret',
      responses: { 200: secret },
      async handler(req) {
        return json(200, { data: { secret: await webhooks.rotateSecret(userId(req)) } });
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
      summary: 'Send a delivery again (same X-Webhook-Id and body)',
      responses: { 200: body(message('Queued')) },
      async handler(req) {
        await webhooks.redeliver(userId(req), idParam(req, 'id', 'webhook_delivery_not_found'));
        return json(200, { message: 'Delivery queued.' });
      },
    },
  ];
}
