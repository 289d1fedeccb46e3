/**
 * OpenAPI:
 * 1. /api/openapi.json is an OpenAPI 3.1 document with every route the router knows.
 * 2. request bodies and query parameters come from the validation schemas (limits, enums, required).
 * 3. /api/docs serves an HTML page that reads the document.
 */
import t from 'tap';
import { buildApp } from '../api/app.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);

t.test('every route is documented', async (t) => {
  const res = await api.request('GET', '/openapi.json');
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /application\/json/);
  const doc = res.body;
  t.equal(doc.openapi, '3.1.0');
  t.equal(doc.servers[0].url, api.platform.runtime.publicUrl(), 'the address it listens on, also when started on port 0');
  t.notMatch(doc.servers[0].url, /:0$/);

  // The same router the server uses, built over a runtime stand-in: only route definitions are read.
  const { router } = buildApp({ config: api.config, logger: (await import('../runtime/logger.js')).createLogger('silent'), runtime: { services: {} } as never });
  const routes = router.routes();
  t.ok(routes.length >= 40);
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z]+)/g, '{$1}');
    t.ok(doc.paths[path]?.[route.method.toLowerCase()], `${route.method} ${route.path}`);
  }
});

t.test('schemas carry the limits', async (t) => {
  const doc = (await api.request('GET', '/openapi.json')).body;
  const assistant = doc.paths['/api/user/assistant'].post.requestBody.content['application/json'].schema;
  t.match(assistant.required, ['name', 'voice_id', 'language_id', 'type', 'mode', 'timezone', 'initial_message', 'system_prompt']);
  t.same(assistant.properties.speech_speed, { type: 'number', minimum: 0.7, maximum: 1.2 });
  t.same(assistant.properties.initial_message, { type: 'string', maxLength: 200 });
  t.same(assistant.properties.mode, { enum: ['pipeline', 'multimodal', 'dualplex'] });
  t.same(assistant.properties.knowledgebase_id.type, ['integer', 'null']);
  const documents = doc.paths['/api/user/knowledgebases/{id}/documents'].post;
  t.ok(documents.requestBody.content['multipart/form-data'].schema.properties.file);
  t.same(documents.parameters[0], { name: 'id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } });
  const search = doc.paths['/api/user/phone-numbers/search'].get;
  t.match(search.parameters.find((p: { name: string }) => p.name === 'country_code'), { in: 'query', required: false, schema: { enum: ['US', 'CA', 'GB', 'AU', 'IL', 'PL', 'FI', 'NL', 'DK', 'IT'] } });
  t.same(doc.paths['/api/user/tools'].post.security, [{ bearer: [] }]);
  t.notOk(doc.paths['/api/auth/login'].post.security);
});

t.test('docs page', async (t) => {
  const res = await api.request('GET', '/docs');
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/html/);
  t.match(res.body, /openapi\.json/);
});
