import type { AssistantService } from '../../runtime/assistants/service.js';
import { createAssistantSchema, disableWebhookSchema, enableWebhookSchema, updateAssistantSchema } from '../../schemas/assistants.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { array, dataOf, message, messageWith } from '../../schemas/shapes.js';
import { assistant, assistantSummary } from '../../schemas/responses.js';

const webhookSwitched = body(messageWith({ type: 'array', maxItems: 0, description: 'Always empty' }, 'Done'));

const tag = 'Assistants';

export function assistantRoutes(assistants: AssistantService): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/assistant',
      auth: 'user',
      tag,
      summary: 'Create an assistant (status inactive)',
      requestSchema: createAssistantSchema.schema,
      responses: { 201: body(messageWith(assistantSummary, 'The new assistant')) },
      async handler(req) {
        const data = await assistants.create(userId(req), createAssistantSchema(req.body));
        return json(201, { message: 'Assistant created successfully', data });
      },
    },
    {
      method: 'GET',
      path: '/api/user/assistants',
      auth: 'user',
      tag,
      summary: 'List assistants with every setting',
      responses: { 200: body(dataOf(array(assistant, 'Your assistants'), 'Your assistants')) },
      async handler(req) {
        return json(200, { data: await assistants.list(userId(req)) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/assistant/:id',
      auth: 'user',
      tag,
      summary: 'Get an assistant with every setting, its uuid, status and timestamps',
      responses: { 200: body(dataOf(assistant, 'The assistant')) },
      async handler(req) {
        return json(200, { data: await assistants.get(userId(req), idParam(req, 'id', 'assistant_not_found')) });
      },
    },
    {
      method: 'PUT',
      path: '/api/user/assistant/:id',
      auth: 'user',
      tag,
      summary: 'Update an assistant: given fields change, arrays replace, null clears, a mode change resets mode settings',
      requestSchema: updateAssistantSchema.schema,
      responses: { 200: body(messageWith(assistantSummary, 'The updated assistant')) },
      async handler(req) {
        const id = idParam(req, 'id', 'assistant_not_found');
        const data = await assistants.update(userId(req), id, () => updateAssistantSchema(req.body));
        return json(200, { message: 'Assistant updated successfully', data });
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/assistant/:id',
      auth: 'user',
      failureMessage: 'Assistant deletion failed',
      tag,
      summary: 'Delete an assistant permanently',
      responses: { 200: body(message('Deleted')) },
      async handler(req) {
        await assistants.remove(userId(req), idParam(req, 'id', 'assistant_not_found'));
        return json(200, { message: 'Assistant deleted successfully' });
      },
    },
    {
      method: 'POST',
      path: '/api/user/assistants/disable-webhook',
      auth: 'user',
      tag,
      summary: 'Stop webhook notifications of an assistant',
      requestSchema: disableWebhookSchema.schema,
      errors: [404],
      responses: { 200: webhookSwitched },
      async handler(req) {
        const { assistant_id } = disableWebhookSchema(req.body);
        await assistants.disableWebhook(userId(req), assistant_id);
        return json(200, { message: 'Webhook disabled successfully', data: [] });
      },
    },
    {
      method: 'POST',
      path: '/api/user/assistants/enable-webhook',
      auth: 'user',
      tag,
      summary: 'Send post-call webhook notifications of an assistant to a URL',
      requestSchema: enableWebhookSchema.schema,
      errors: [404],
      responses: { 200: webhookSwitched },
      async handler(req) {
        const { assistant_id, webhook_url } = enableWebhookSchema(req.body);
        await assistants.enableWebhook(userId(req), assistant_id, webhook_url);
        return json(200, { message: 'Webhook enabled successfully', data: [] });
      },
    },
  ];
}
