/**
 * OpenAPI:
 * 1. /api/openapi.json is an OpenAPI 3.1 document with every route the router knows.
 * 2. request bodies and query parameters come from the validation schemas (limits, enums, required).
 * 3. every route documents an answer, with a schema (or a media type), for every status it can
 *    give (`answeredStatuses`), and every field of every answer has a description: a route added
 *    without them fails here.
 * 4. the assistant's fields carry their ranges and defaults, from the rules that validate them and
 *    the defaults the service fills in.
 * 5. the answers the tests receive are checked against the document (helpers/contract.ts): a body
 *    of the wrong shape, and a status the operation does not document, are refused with the path,
 *    status and field.
 * 6. /api/docs serves an HTML page that reads the document, with the realtime sockets' messages.
 */
import t from 'tap';
import { buildApp } from '../api/app.js';
import { answeredStatuses } from '../api/openapi.js';
import { ASSISTANT_DEFAULTS } from '../schemas/assistants.js';
import { createLogger } from '../runtime/logger.js';
import { ContractChecker, ContractViolation } from './helpers/contract.js';
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
  const { router } = buildApp({ config: api.config, logger: createLogger('silent'), runtime: { services: {} } as never });
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
  t.same(assistant.properties.speech_speed, { type: 'number', minimum: 0.7, maximum: 1.2, default: 1, description: 'Speaking rate, 1 is normal. 0.7 to 1.2. Default 1.' });
  t.same(assistant.properties.initial_message, { type: 'string', maxLength: 200, description: 'First words of the assistant; {{variables}} are substituted. At most 200 characters.' });
  t.match(assistant.properties.mode, { enum: ['pipeline', 'multimodal', 'dualplex'], description: /^Engine: pipeline/ });
  t.same(assistant.properties.knowledgebase_id.type, ['integer', 'null']);
  const documents = doc.paths['/api/user/knowledgebases/{id}/documents'].post;
  t.ok(documents.requestBody.content['multipart/form-data'].schema.properties.file);
  t.same(documents.parameters[0], { name: 'id', in: 'path', required: true, description: 'Id of the resource', schema: { type: 'integer', minimum: 1 } });
  const listing = doc.paths['/api/user/conversations'].get.parameters.find((p: { name: string }) => p.name === 'assistant_id');
  t.same(listing.schema.oneOf, [{ type: 'integer', minimum: 1 }, { type: 'string', format: 'uuid' }], 'the conversation filter takes the integer id or the UUID');
  const search = doc.paths['/api/user/phone-numbers/search'].get;
  t.match(search.parameters.find((p: { name: string }) => p.name === 'country_code'), { in: 'query', required: false, schema: { enum: ['US', 'CA', 'GB', 'AU', 'IL', 'PL', 'FI', 'NL', 'DK', 'IT'] } });
  t.same(doc.paths['/api/user/tools'].post.security, [{ bearer: [] }]);
  t.notOk(doc.paths['/api/auth/login'].post.security);
});

/** Every place in a schema where a described value sits: properties, items, variants. */
function* fieldsOf(schema: Record<string, any>, at: string): Generator<[string, Record<string, any>]> {
  for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, Record<string, any>>)) {
    yield [`${at}.${name}`, property];
    yield* fieldsOf(property, `${at}.${name}`);
  }
  if (schema.items) {
    yield [`${at}[]`, schema.items];
    yield* fieldsOf(schema.items, `${at}[]`);
  }
  for (const variant of (schema.anyOf ?? []) as Array<Record<string, any>>) yield* fieldsOf(variant, at);
}

t.test('every route documents every answer it can give, with described fields', async (t) => {
  const doc = (await api.request('GET', '/openapi.json')).body;
  const { router } = buildApp({ config: api.config, logger: createLogger('silent'), runtime: { services: {} } as never });
  let answers = 0;
  for (const route of router.routes()) {
    const name = `${route.method} ${route.path}`;
    const operation = doc.paths[route.path.replace(/:([A-Za-z]+)/g, '{$1}')][route.method.toLowerCase()];
    t.ok(Object.keys(route.responses).some((status) => Number(status) < 300), `${name} documents its success`);
    for (const status of Object.keys(answeredStatuses(route))) {
      const answer = operation.responses[status];
      t.ok(answer?.description, `${name} ${status} is documented`);
      const [type, media] = (Object.entries(answer?.content ?? {})[0] ?? []) as [string?, Record<string, any>?];
      if (type === 'application/json') {
        t.ok(media!.schema?.description, `${name} ${status} has a described schema`);
        for (const [field, schema] of fieldsOf(media!.schema, `${name} ${status}`)) {
          if (!schema.description) t.fail(`${field} has no description`);
          answers++;
        }
      }
    }
  }
  t.ok(answers > 1000, `${answers} described fields`);
  t.match(doc.paths['/api/user/tools'].post.responses['403'].content['application/json'].schema.required, ['message'], "a route's own errors in its family");
  t.match(doc.paths['/api/user/knowledgebases/{id}'].get.responses['404'].content['application/json'].schema.required, ['error']);
  t.match(doc.paths['/api/conversations/{id}'].get.responses['404'].content['application/json'].schema.required, ['status', 'error']);
  t.match(doc.paths['/api/user/knowledgebases/{id}'].get.responses['401'].content['application/json'].schema.required, ['message'], 'authentication is the transport: {message} in every family');
});

t.test("the assistant's fields carry ranges and defaults from validation", async (t) => {
  const doc = (await api.request('GET', '/openapi.json')).body;
  const read = doc.paths['/api/user/assistant/{id}'].get.responses['200'].content['application/json'].schema.properties.data;
  const defaulted = Object.entries(ASSISTANT_DEFAULTS).filter(([, value]) => value !== null);
  t.ok(defaulted.length >= 30, `${defaulted.length} defaulted settings`);
  for (const [name, value] of defaulted) {
    t.same(read.properties[name].default, value, `${name} default`);
    t.match(read.properties[name].description, `Default ${JSON.stringify(value)}.`, `${name} says its default`);
  }
  t.match(read.properties.max_duration, { minimum: 20, maximum: 1200, description: /Longest call, in seconds\. 20 to 1200\. Default 600\./ });
  t.match(read.properties.max_initial_silence_duration, { type: ['integer', 'null'], minimum: 1, maximum: 120, description: /null disables\. 1 to 120\./ });
  t.match(read.properties.uuid, { format: 'uuid', description: String });
  t.ok(read.required.includes('turn_detection_threshold'), 'a read shows every setting, a nullable one as null');
  const created = doc.paths['/api/user/assistant'].post.responses['201'].content['application/json'].schema.properties.data;
  t.same(created.required, ['id', 'uuid', 'name', 'status', 'type', 'mode']);
});

t.test('answers are checked against the document', async (t) => {
  const doc = (await api.request('GET', '/openapi.json')).body;
  const checker = new ContractChecker(doc);
  const url = `${api.origin}/api/user/assistant/7`;
  const good = { message: 'Assistant updated successfully', data: { id: 7, uuid: '00000000-0000-4000-8000-000000000000', name: 'A', status: 'inactive', type: 'inbound', mode: 'pipeline' } };
  checker.check('PUT', url, 200, 'application/json', good);
  t.throws(() => checker.check('PUT', url, 200, 'application/json', { ...good, data: { ...good.data, uuid: undefined } }), new ContractViolation("PUT /api/user/assistant/7 (/api/user/assistant/{id}, putApiUserAssistantId) answered 200: the body does not match the OpenAPI document:\n  /data: must have required property 'uuid'\nBody: " + JSON.stringify({ ...good, data: { ...good.data, uuid: undefined } })));
  t.throws(() => checker.check('PUT', url, 200, 'application/json', { ...good, data: { ...good.data, colour: 'red' } }), { message: /\/data: must NOT have additional properties 'colour'/ }, 'a field the document does not have');
  t.throws(() => checker.check('PUT', url, 200, 'application/json', { ...good, data: { ...good.data, mode: 'turbo' } }), { message: /\/data\/mode: must be equal to one of the allowed values \["pipeline","multimodal","dualplex"\]/ });
  t.throws(() => checker.check('PUT', url, 409, 'application/json', { message: 'Conflict' }), { message: /answered 409: the OpenAPI document has no 409 answer for this operation/ }, 'an undocumented status');
  t.throws(() => checker.check('GET', `${api.origin}/api/user/knowledgebases/3`, 404, 'application/json', { message: 'Knowledgebase not found.' }), { message: /must have required property 'error'/ }, 'an error body of the wrong family');
  t.throws(() => checker.check('GET', `${api.origin}/api/docs`, 200, 'application/json', {}), { message: /documented as text\/html, answered application\/json/ });
  checker.check('GET', `${api.origin}/api/no-such-path`, 404, 'application/json', { message: 'Not found.' });
  t.equal(checker.operation('GET', '/api/user/phone-numbers/all')?.path, '/api/user/phone-numbers/all', 'static segments before parameters, as the router');

  const wrong = await api.request('PUT', '/user/assistant/99999999', { token: (await api.user()).token, body: { name: 'x' } }).catch((error: unknown) => error);
  t.notOk(wrong instanceof Error, 'a real answer passes the check');
});

t.test('docs page', async (t) => {
  const res = await api.request('GET', '/docs');
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/html/);
  t.match(res.body, /openapi\.json/);
  t.match(res.body, /x-websockets/, 'it shows the sockets of the document');
  const doc = (await api.request('GET', '/openapi.json')).body;
  const sockets = doc['x-websockets'] as Array<{ path: string; client: Record<string, any>; server: Record<string, any> }>;
  t.same(sockets.map((s) => s.path), ['/ws/conversations/{conversation_id}?after={message_id}', '/ws/web-call?call_id={call_id}&token={token}']);
  t.same(Object.keys(sockets[0]!.client), ['message']);
  t.same(Object.keys(sockets[0]!.server), ['delta', 'message', 'typing', 'synced', 'error']);
  t.same(Object.keys(sockets[1]!.client), ['mark', 'dtmf', 'hangup']);
  t.same(Object.keys(sockets[1]!.server), ['mark', 'clear', 'error']);
  for (const socket of sockets) for (const frame of [...Object.values(socket.client), ...Object.values(socket.server)]) for (const [field, schema] of fieldsOf(frame, socket.path)) t.ok(schema.description, field);
});
