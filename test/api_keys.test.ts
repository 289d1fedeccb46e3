/**
 * API keys (spec 4.1) over real HTTP:
 * 1. create returns the token once with name and created_at; the key authenticates; 422 without a name.
 * 2. list shows id, name, last_used_at, created_at and never a token; last_used_at is set after use.
 * 3. delete stops the key at once; a second delete, another user's key and a non-numeric id are 404 {message}.
 * 4. another user's keys never appear in a list.
 */
import t from 'tap';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const alice = await api.user('Alice');
const bob = await api.user('Bob');

t.test('create, use, list and delete a key', async (t) => {
  const created = await api.request('POST', '/user/api-keys', { token: alice.token, body: { name: 'production' } });
  t.equal(created.status, 201);
  t.match(created.body, { message: String, api_key: { name: 'production', token: /^apk_[A-Za-z0-9_-]{43}$/, created_at: /Z$/ } });
  t.same(Object.keys(created.body.api_key).sort(), ['created_at', 'name', 'token']);
  const key = created.body.api_key.token as string;

  const me = await api.request('GET', '/user', { token: key });
  t.equal(me.status, 200);
  t.equal(me.body.data.id, alice.id, 'the key authenticates as its owner');

  // The use is recorded after the answer, off the request's path: the list shows it once written.
  await api.platform.runtime.settled();
  const list = await api.request('GET', '/user/api-keys', { token: alice.token });
  t.equal(list.status, 200);
  t.equal(list.body.data.length, 1);
  const [entry] = list.body.data;
  t.same(Object.keys(entry).sort(), ['created_at', 'id', 'last_used_at', 'name']);
  t.equal(entry.name, 'production');
  t.match(entry.last_used_at, /Z$/, 'use was recorded');
  t.notOk(JSON.stringify(list.body).includes(key), 'token never listed');

  const deleted = await api.request('DELETE', `/user/api-keys/${entry.id}`, { token: alice.token });
  t.equal(deleted.status, 200);
  t.same(deleted.body, { message: 'API key deleted successfully.' });
  t.equal((await api.request('GET', '/user', { token: key })).status, 401, 'deleted key stops working at once');
  const again = await api.request('DELETE', `/user/api-keys/${entry.id}`, { token: alice.token });
  t.equal(again.status, 404);
  t.same(again.body, { message: 'API key not found.' });
});

t.test('a key can create another key', async (t) => {
  const first = await api.request('POST', '/user/api-keys', { token: alice.token, body: { name: 'one' } });
  const second = await api.request('POST', '/user/api-keys', { token: first.body.api_key.token, body: { name: 'two' } });
  t.equal(second.status, 201);
});

t.test('name is required', async (t) => {
  for (const body of [{}, { name: '' }, { name: null }]) {
    const res = await api.request('POST', '/user/api-keys', { token: alice.token, body });
    t.equal(res.status, 422);
    t.same(res.body, { message: 'The name field is required.', errors: { name: ['The name field is required.'] } }, JSON.stringify(body));
  }
  const long = await api.request('POST', '/user/api-keys', { token: alice.token, body: { name: 'n'.repeat(256) } });
  t.same(long.body.errors, { name: ['The name may not be greater than 255 characters.'] });
});

t.test('keys are private to their owner', async (t) => {
  const bobs = await api.request('POST', '/user/api-keys', { token: bob.token, body: { name: 'bob-key' } });
  const bobList = await api.request('GET', '/user/api-keys', { token: bob.token });
  const bobKeyId = bobList.body.data[0].id;
  const aliceList = await api.request('GET', '/user/api-keys', { token: alice.token });
  t.notOk(aliceList.body.data.some((k: { name: string }) => k.name === 'bob-key'), 'not in another list');

  const stolen = await api.request('DELETE', `/user/api-keys/${bobKeyId}`, { token: alice.token });
  t.equal(stolen.status, 404);
  t.same(stolen.body, { message: 'API key not found.' });
  t.equal((await api.request('GET', '/user', { token: bobs.body.api_key.token })).status, 200, 'still works');

  for (const id of ['abc', '0', '-1', '99999999999999999999']) {
    const res = await api.request('DELETE', `/user/api-keys/${id}`, { token: alice.token });
    t.equal(res.status, 404, id);
  }
  t.equal((await api.request('GET', '/user/api-keys')).status, 401);
});
