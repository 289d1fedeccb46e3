import type { RouteDefinition } from './http/types.js';

/**
 * The OpenAPI 3.1 document, generated from the routes and the same fastest-validator schemas that
 * validate requests, so it cannot drift from what the server accepts.
 */

type Json = Record<string, unknown>;

interface FvRule {
  type?: string;
  optional?: boolean;
  nullable?: boolean;
  description?: string;
  min?: number;
  max?: number;
  integer?: boolean;
  pattern?: RegExp | string;
  values?: unknown[];
  items?: FvRule;
  props?: Record<string, FvRule>;
  notEqual?: unknown;
  minChars?: number;
  maxChars?: number;
}

/** JSON Schema (2020-12, as OpenAPI 3.1 uses) of one fastest-validator rule. */
export function jsonSchemaOf(rule: FvRule): Json {
  let schema: Json;
  switch (rule.type) {
    case 'string':
      schema = { type: 'string' };
      if (rule.minChars !== undefined) schema.minLength = rule.minChars;
      if (rule.maxChars !== undefined) schema.maxLength = rule.maxChars;
      if (rule.pattern !== undefined) schema.pattern = rule.pattern instanceof RegExp ? rule.pattern.source : rule.pattern;
      break;
    case 'number':
      schema = { type: rule.integer ? 'integer' : 'number' };
      if (rule.min !== undefined) schema.minimum = rule.min;
      if (rule.max !== undefined) schema.maximum = rule.max;
      if (rule.notEqual !== undefined) schema.not = { const: rule.notEqual };
      break;
    case 'boolean':
      schema = { type: 'boolean' };
      break;
    case 'enum':
      schema = { enum: rule.values ?? [] };
      break;
    case 'email':
      schema = { type: 'string', format: 'email', ...(rule.max !== undefined ? { maxLength: rule.max } : {}) };
      break;
    case 'url':
      schema = { type: 'string', format: 'uri' };
      break;
    case 'uuid':
      schema = { type: 'string', format: 'uuid' };
      break;
    case 'array':
      schema = { type: 'array', items: rule.items ? jsonSchemaOf(rule.items) : {} };
      if (rule.min !== undefined) schema.minItems = rule.min;
      if (rule.max !== undefined) schema.maxItems = rule.max;
      break;
    case 'object':
      schema = objectSchema(rule.props ?? {});
      break;
    case 'record':
      schema = { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] } };
      break;
    default:
      schema = {};
  }
  if (rule.description) schema.description = rule.description;
  if (rule.nullable) {
    if (typeof schema.type === 'string') schema.type = [schema.type, 'null'];
    else if (Array.isArray(schema.enum)) schema.enum = [...(schema.enum as unknown[]), null];
  }
  return schema;
}

function objectSchema(props: Record<string, FvRule>): Json {
  const properties: Json = {};
  const required: string[] = [];
  for (const [name, rule] of Object.entries(props)) {
    if (name.startsWith('$$')) continue;
    properties[name] = jsonSchemaOf(rule);
    if (!rule.optional) required.push(name);
  }
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}) };
}

const errorResponses: Json = {
  '401': { description: 'Unauthenticated', content: { 'application/json': { schema: { $ref: '#/components/schemas/Message' } } } },
  '404': { description: 'Not found (also for other users\' resources)' },
  '422': { description: 'Validation failed', content: { 'application/json': { schema: { $ref: '#/components/schemas/ValidationError' } } } },
};

export function openApiDocument(routes: readonly RouteDefinition[], publicUrl: string): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters: Json[] = [...route.path.matchAll(/:([A-Za-z]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'integer', minimum: 1 } }));
    for (const [name, rule] of Object.entries((route.querySchema ?? {}) as Record<string, FvRule>)) {
      parameters.push({ name, in: 'query', required: !rule.optional, schema: jsonSchemaOf(rule), ...(rule.description ? { description: rule.description } : {}) });
    }
    const operation: Json = {
      operationId: `${route.method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      summary: route.summary ?? `${route.method} ${path}`,
      tags: [route.tag ?? 'Other'],
      parameters,
      responses: {
        [String(route.successStatus ?? 200)]: { description: 'Success', content: { 'application/json': { schema: {} } } },
        ...(route.auth === 'none' ? {} : { '401': errorResponses['401'] }),
        ...(parameters.some((p) => p.in === 'path') ? { '404': errorResponses['404'] } : {}),
        ...(route.requestSchema || route.querySchema ? { '422': errorResponses['422'] } : {}),
      },
    };
    if (route.auth === 'user') operation.security = [{ bearer: [] }];
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
      description: 'Configure AI assistants for phone calls, browser calls and chat: assistants, knowledgebases, tools, phone numbers, keys.',
    },
    servers: [{ url: publicUrl }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'An API key or a session token' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The operator token (ADMIN_TOKEN)' },
      },
      schemas: {
        Message: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
        ValidationError: {
          type: 'object',
          properties: { message: { type: 'string' }, errors: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } } },
          required: ['message', 'errors'],
        },
      },
    },
    paths,
  };
}

/** A self-contained page (no CDN) that lists the operations of `/api/openapi.json`. */
export const DOCS_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Assistant Platform API</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:960px;padding:24px;color:#1d2330}
h1{margin:0 0 4px}h2{margin:32px 0 8px;border-bottom:1px solid #dde}
details{border:1px solid #dde;border-radius:6px;margin:6px 0;padding:6px 10px}
summary{cursor:pointer}code,pre{font:13px ui-monospace,monospace}pre{background:#f5f6fa;padding:8px;overflow:auto}
.m{display:inline-block;min-width:64px;font-weight:600}.GET{color:#16794c}.POST{color:#1f5fbf}.PUT,.PATCH{color:#9a6700}.DELETE{color:#b42318}
</style></head><body>
<h1>Assistant Platform API</h1><p id="intro">Loading <a href="/api/openapi.json">/api/openapi.json</a>…</p><main id="ops"></main>
<script>
fetch('/api/openapi.json').then(r=>r.json()).then(doc=>{
  document.getElementById('intro').innerHTML=doc.info.description+' Base URL: <code>'+doc.servers[0].url+'</code>. Machine-readable: <a href="/api/openapi.json">openapi.json</a>.';
  const groups={};
  for(const [path,ops] of Object.entries(doc.paths))for(const [method,op] of Object.entries(ops))(groups[op.tags[0]]??=[]).push({path,method:method.toUpperCase(),op});
  const main=document.getElementById('ops');
  for(const [tag,items] of Object.entries(groups)){
    const h=document.createElement('h2');h.textContent=tag;main.append(h);
    for(const {path,method,op} of items){
      const d=document.createElement('details');const s=document.createElement('summary');
      s.innerHTML='<span class="m '+method+'">'+method+'</span> <code></code> — ';s.querySelector('code').textContent=path;s.append(op.summary);d.append(s);
      const pre=document.createElement('pre');pre.textContent=JSON.stringify({security:op.security,parameters:op.parameters,requestBody:op.requestBody,responses:Object.keys(op.responses)},null,2);d.append(pre);main.append(d);
    }
  }
});
</script></body></html>`;
