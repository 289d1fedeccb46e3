import type { ApiKeyService } from '../../runtime/apiKeys/service.js';
import { createApiKeySchema } from '../../schemas/apiKeys.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { array, dataOf, message, object, string } from '../../schemas/shapes.js';
import { apiKey, apiKeyCreated } from '../../schemas/responses.js';

export function apiKeyRoutes(apiKeys: ApiKeyService): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/api-keys',
      auth: 'user',
      tag: 'API keys',
      summary: 'Create an API key; the token is returned only in this response',
      requestSchema: createApiKeySchema.schema,
      responses: { 201: body(object({ message: string('What happened, in words for people'), api_key: apiKeyCreated }, 'The key, with its token (shown only now)')) },
      async handler(req) {
        const { name } = createApiKeySchema(req.body);
        const key = await apiKeys.create(userId(req), name);
        return json(201, {
          message: 'API key created successfully. Store the token now: it will not be shown again.',
          api_key: { name: key.name, token: key.token, created_at: key.created_at },
        });
      },
    },
    {
      method: 'GET',
      path: '/api/user/api-keys',
      auth: 'user',
      tag: 'API keys',
      summary: 'List API keys (never their tokens)',
      responses: { 200: body(dataOf(array(apiKey, 'Your API keys'), 'Your API keys')) },
      async handler(req) {
        return json(200, { data: await apiKeys.list(userId(req)) });
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/api-keys/:id',
      auth: 'user',
      tag: 'API keys',
      summary: 'Delete an API key; it stops working at once',
      responses: { 200: body(message('Deleted')) },
      async handler(req) {
        await apiKeys.remove(userId(req), idParam(req, 'id', 'api_key_not_found'));
        return json(200, { message: 'API key deleted successfully.' });
      },
    },
  ];
}
