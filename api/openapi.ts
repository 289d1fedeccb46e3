import type { ResponseDoc, RouteDefinition } from './http/types.js';
import { jsonSchemaOf, objectSchema, type FvRule, type Json } from '../schemas/jsonSchema.js';
import { errorBodies, validationError } from '../schemas/shapes.js';
import { SOCKETS } from './sockets/messages.js';

/**
 * The OpenAPI 3.1 document, generated from the routes and the same fastest-validator schemas that
 * validate requests, so it cannot drift from what the server accepts. Answers come from each
 * route's `responses` plus the errors every route of its kind answers (`answeredStatuses`); the
 * realtime sockets are described in the `x-websockets` extension, which the docs page shows.
 */

export { jsonSchemaOf };

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const ERROR_WORDS: Readonly<Record<number, string>> = {
  400: 'The body could not be read (not JSON, a broken multipart body, a repeated header)',
  401: 'Unauthenticated: no bearer token, or an unknown, expired or revoked one',
  402: 'Insufficient balance',
  403: 'Refused',
  404: "Not found (another user's resource is not found either)",
  409: 'Conflict',
  413: 'The body is too large',
  415: 'The content type is not accepted here',
  422: 'Validation failed',
  429: 'Too many requests; try again after Retry-After seconds',
  500: 'Server error',
  502: 'A provider the operation needs failed',
  503: 'The server is starting or stopping (Retry-After), or is busy',
};

/** Statuses whose body is `{message}` whatever the route's family: the transport answers them (`api/http/errors.ts`). */
const TRANSPORT_STATUSES = new Set([400, 401, 405, 413, 415]);

/**
 * Every answer a route can give, by status: its own `responses`, and the errors of its kind,
 * in the body of its family (spec section 7). The tests check that each route has these and that
 * every answer they receive is one of them.
 */
export function answeredStatuses(route: RouteDefinition): Record<number, ResponseDoc> {
  const family = route.family ?? 'message';
  const error = (status: number): ResponseDoc => {
    if (status === 422) return { description: ERROR_WORDS[422]!, schema: validationError };
    const shape = TRANSPORT_STATUSES.has(status) ? errorBodies.message : errorBodies[family];
    return { description: ERROR_WORDS[status] ?? 'An error', schema: shape };
  };
  const statuses = new Set<number>([500, 503, ...(route.errors ?? [])]);
  if (route.auth !== 'none') statuses.add(401);
  if (route.path.includes('/:')) statuses.add(404);
  if (route.requestSchema || route.querySchema) statuses.add(422);
  if (BODY_METHODS.has(route.method)) for (const status of [400, 413, 415]) statuses.add(status);
  const out: Record<number, ResponseDoc> = {};
  for (const status of [...statuses].sort()) out[status] = error(status);
  return { ...out, ...route.responses };
}

function responseObject(doc: ResponseDoc): Json {
  if (doc.schema) return { description: doc.description, content: { 'application/json': { schema: doc.schema } } };
  if (doc.contentType) return { description: doc.description, content: { [doc.contentType]: { schema: { type: 'string' } } } };
  return { description: doc.description };
}

/** Path parameters that are not ids: their words and schema. */
const TEXT_PARAMETERS: Readonly<Record<string, string>> = {
  phoneNumber: 'The number, E.164; its + may be sent as is or as %2B',
  file: 'The file name',
};

function pathParameter(name: string): Json {
  const words = TEXT_PARAMETERS[name];
  if (words) return { description: words, schema: { type: 'string' } };
  return { description: name === 'id' ? 'Id of the resource' : `The ${name}`, schema: { type: 'integer', minimum: 1 } };
}

export function operationId(method: string, path: string): string {
  return `${method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ''))}`;
}

export function openApiDocument(routes: readonly RouteDefinition[], publicUrl: string): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters: Json[] = [...route.path.matchAll(/:([A-Za-z]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, ...pathParameter(m[1]!) }));
    for (const [name, rule] of Object.entries((route.querySchema ?? {}) as Record<string, FvRule>)) {
      const schema = jsonSchemaOf(rule);
      parameters.push({ name, in: 'query', required: !rule.optional, schema, ...(schema.description ? { description: schema.description } : {}) });
    }
    const responses: Json = {};
    for (const [status, doc] of Object.entries(answeredStatuses(route))) responses[status] = responseObject(doc);
    const operation: Json = {
      operationId: operationId(route.method, path),
      summary: route.summary ?? `${route.method} ${path}`,
      tags: [route.tag ?? 'Other'],
      parameters,
      responses,
    };
    if (route.auth === 'user') operation.security = [{ bearer: [] }];
    if (route.auth === 'optional') operation.security = [{}, { bearer: [] }];
    if (route.auth === 'admin') operation.security = [{ adminToken: [] }];
    if (route.requestSchema) {
      const body = objectSchema(route.requestSchema as Record<string, FvRule>);
      const content: Json = { 'application/json': { schema: body } };
      if (route.multipart) {
        const properties = { ...(body.properties as Json), file: { type: 'string', format: 'binary', description: 'At most 20 MB' } };
        content['multipart/form-data'] = { schema: { ...body, properties } };
      }
      operation.requestBody = { required: true, content };
    }
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Assistant Platform API',
      version: '1.0.0',
      description:
        'Configure AI assistants for phone calls, browser calls, website chat, WhatsApp and SMS: assistants, knowledgebases, tools, phone numbers, campaigns, channels, keys. Every answer of every operation is described here, errors included. A path or method that matches no operation is answered 404 or 405 `{message}`, and a CORS preflight 204. The realtime sockets are described under `x-websockets`.',
    },
    servers: [{ url: publicUrl }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'An API key or a session token' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The operator token (ADMIN_TOKEN)' },
      },
    },
    paths,
    'x-websockets': SOCKETS,
  };
}
