/**
 * Mid-call tools (spec 2.4, 4.3, section 7 rows):
 * 1. create returns every field with defaults (timeout 10, empty headers and schema).
 * 2. validation: the name rule's exact message, method, timeout range, schema items (2-32 / 3-255, type).
 * 3. update is partial, headers and schema replace; 404 "Tool not found"; 422 "Validation failed".
 * 4. list, get, delete; another user's tool is 404 and never listed.
 * 5. plan limit: the sixth tool on the free plan is 403 with the plan's number, also under concurrency.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const alice = await api.user('Alice');
const bob = await api.user('Bob');

const valid = {
  name: 'check_order',
  description: 'Look up an order by its number when the caller asks about delivery.',
  endpoint: 'https://api.example.com/orders',
  method: 'POST',
};

t.test('create with defaults', async (t) => {
  const res = await api.request('POST', '/user/tools', { token: alice.token, body: valid });
  t.equal(res.status, 201);
  t.same(Object.keys(res.body.data).sort(), ['created_at', 'description', 'endpoint', 'headers', 'id', 'method', 'name', 'schema', 'timeout', 'updated_at']);
  t.match(res.body.data, { ...valid, timeout: 10, headers: [], schema: [] });
  t.match(res.body.message, /created/);
  await api.request('DELETE', `/user/tools/${res.body.data.id}`, { token: alice.token });
});

t.test('validation', async (t) => {
  const badName = await api.request('POST', '/user/tools', { token: alice.token, body: { ...valid, name: 'CheckOrder' } });
  t.equal(badName.status, 422);
  t.same(badName.body.errors, { name: ['Tool name must contain only lowercase letters and underscores, and start with a letter.'] });
  for (const name of ['_order', '1order', 'order-check', 'order check']) {
    const res = await api.request('POST', '/user/tools', { token: alice.token, body: { ...valid, name } });
    t.equal(res.status, 422, name);
  }
  const many = await api.request('POST', '/user/tools', {
    token: alice.token,
    body: { ...valid, description: 'd'.repeat(256), endpoint: 'not a url', method: 'FETCH', timeout: 31, schema: [{ name: 'x', type: 'date', description: 'ab' }, { type: 'string' }] },
  });
  t.same(many.body.errors, {
    description: ['The description may not be greater than 255 characters.'],
    endpoint: ['The endpoint must be a valid URL.'],
    method: ['The selected method is invalid.'],
    timeout: ['The timeout must be between 1 and 30.'],
    'schema.0.name': ['The schema.0.name must be at least 2 characters.'],
    'schema.0.type': ['The selected schema.0.type is invalid.'],
    'schema.0.description': ['The schema.0.description must be at least 3 characters.'],
    'schema.1.name': ['The schema.1.name field is required.'],
    'schema.1.description': ['The schema.1.description field is required.'],
  });
  const required = await api.request('POST', '/user/tools', { token: alice.token, body: {} });
  t.same(Object.keys(required.body.errors).sort(), ['description', 'endpoint', 'method', 'name']);
});

t.test('update, list, get, delete', async (t) => {
  const created = await api.request('POST', '/user/tools', {
    token: alice.token,
    body: { ...valid, timeout: 5, headers: [{ name: 'X-Api-Key', value: 'k1' }, { name: 'X-Tenant', value: 't' }], schema: [{ name: 'order_id', type: 'string', description: 'The order number' }] },
  });
  const id = created.body.data.id;
  const updated = await api.request('PUT', `/user/tools/${id}`, { token: alice.token, body: { timeout: 20, headers: [{ name: 'Authorization', value: 'Bearer z' }] } });
  t.equal(updated.status, 200);
  t.match(updated.body, { message: String, data: { id, name: 'check_order', method: 'POST', timeout: 20, headers: [{ name: 'Authorization', value: 'Bearer z' }], schema: [{ name: 'order_id' }] } });
  t.equal(updated.body.data.headers.length, 1, 'headers replaced');
  const cleared = await api.request('PUT', `/user/tools/${id}`, { token: alice.token, body: { schema: [] } });
  t.same(cleared.body.data.schema, [], 'an empty array removes all items');
  t.equal(cleared.body.data.timeout, 20, 'untouched fields kept');

  const invalid = await api.request('PUT', `/user/tools/${id}`, { token: alice.token, body: { timeout: 0, name: null } });
  t.equal(invalid.status, 422);
  t.equal(invalid.body.message, 'Validation failed');
  t.same(Object.keys(invalid.body.errors).sort(), ['name', 'timeout']);

  const missing = await api.request('PUT', '/user/tools/999999', { token: alice.token, body: { timeout: 3 } });
  t.same([missing.status, missing.body], [404, { message: 'Tool not found' }]);

  const got = await api.request('GET', `/user/tools/${id}`, { token: alice.token });
  t.equal(got.body.data.timeout, 20);
  const list = await api.request('GET', '/user/tools', { token: alice.token });
  t.ok(list.body.data.some((tool: { id: number }) => tool.id === id));

  for (const [method, body] of [['GET'], ['PUT', { timeout: 2 }], ['DELETE']] as const) {
    const res = await api.request(method, `/user/tools/${id}`, { token: bob.token, body });
    t.same([res.status, res.body], [404, { message: 'Tool not found' }], `${method} by another user`);
  }
  t.notOk((await api.request('GET', '/user/tools', { token: bob.token })).body.data.some((tool: { id: number }) => tool.id === id));
  const invalidForeign = await api.request('PUT', `/user/tools/${id}`, { token: bob.token, body: { timeout: 0 } });
  t.equal(invalidForeign.status, 404, 'not found comes before validation');

  const deleted = await api.request('DELETE', `/user/tools/${id}`, { token: alice.token });
  t.equal(deleted.status, 200);
  t.match(deleted.body, { message: String });
  t.equal((await api.request('GET', `/user/tools/${id}`, { token: alice.token })).status, 404);
});

t.test('plan limit', async (t) => {
  const carol = await api.user('Carol');
  const attempts = await Promise.all(Array.from({ length: 8 }, (_, i) => api.request('POST', '/user/tools', { token: carol.token, body: { ...valid, name: `tool_${'abcdefgh'[i]}` } })));
  t.equal(attempts.filter((r) => r.status === 201).length, 5, 'five on the free plan, even when sent at once');
  const refused = attempts.filter((r) => r.status === 403);
  t.equal(refused.length, 3);
  t.same(refused[0]!.body, { message: 'You have reached the maximum of 5 mid-call tools allowed on your plan. Please upgrade your plan to create more.' });

  await withClient(api.databaseUrl, (db) => db.query(`UPDATE users SET plan = 'pro' WHERE id = $1`, [carol.id]));
  t.equal((await api.request('POST', '/user/tools', { token: carol.token, body: valid })).status, 201, 'pro allows more');
});
