import type { ToolService } from '../../runtime/tools/service.js';
import { createToolSchema, updateToolSchema } from '../../schemas/tools.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { array, dataOf, message, messageWith } from '../../schemas/shapes.js';
import { tool } from '../../schemas/responses.js';

const tag = 'Mid-call tools';

export function toolRoutes(tools: ToolService): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/tools',
      auth: 'user',
      tag,
      summary: 'Create a mid-call tool (plan limit applies)',
      requestSchema: createToolSchema.schema,
      errors: [403],
      responses: { 201: body(messageWith(tool, 'The new tool')) },
      async handler(req) {
        const data = await tools.create(userId(req), createToolSchema(req.body));
        return json(201, { message: 'Tool created successfully.', data });
      },
    },
    {
      method: 'GET',
      path: '/api/user/tools',
      auth: 'user',
      tag,
      summary: 'List mid-call tools',
      responses: { 200: body(dataOf(array(tool, 'Your tools'), 'Your tools')) },
      async handler(req) {
        return json(200, { data: await tools.list(userId(req)) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/tools/:id',
      auth: 'user',
      tag,
      summary: 'Get a mid-call tool',
      responses: { 200: body(dataOf(tool, 'The tool')) },
      async handler(req) {
        return json(200, { data: await tools.get(userId(req), idParam(req, 'id', 'tool_not_found')) });
      },
    },
    {
      method: 'PUT',
      path: '/api/user/tools/:id',
      auth: 'user',
      tag,
      summary: 'Update a mid-call tool: only given fields change; headers and schema replace',
      requestSchema: updateToolSchema.schema,
      responses: { 200: body(messageWith(tool, 'The updated tool')) },
      async handler(req) {
        const id = idParam(req, 'id', 'tool_not_found');
        const data = await tools.update(userId(req), id, () => updateToolSchema(req.body));
        return json(200, { message: 'Tool updated successfully.', data });
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/tools/:id',
      auth: 'user',
      tag,
      summary: 'Delete a mid-call tool and detach it from assistants',
      responses: { 200: body(message('Deleted')) },
      async handler(req) {
        await tools.remove(userId(req), idParam(req, 'id', 'tool_not_found'));
        return json(200, { message: 'Tool deleted successfully.' });
      },
    },
  ];
}
