/**
 * Router:
 * 1. static segments win over parameters; parameters are captured and decoded.
 * 2. unknown paths are not found; a known path with another method lists the allowed ones.
 * 3. trailing slashes and repeated slashes match the same route.
 * 4. conflicting parameter names and duplicate routes are refused at registration.
 */
import t from 'tap';
import { Router } from '../api/http/router.js';
import { json, type RouteDefinition } from '../api/http/types.js';

const route = (method: RouteDefinition['method'], path: string): RouteDefinition => ({ method, path, auth: 'none', responses: {}, handler: () => json(200, {}) });

t.test('matching', async (t) => {
  const router = new Router();
  router.add(route('GET', '/api/user/phone-numbers/all'));
  router.add(route('DELETE', '/api/user/phone-numbers/:id'));
  router.add(route('GET', '/api/user/knowledgebases/:kb/documents/:id'));
  router.add(route('PUT', '/api/user/knowledgebases/:kb/documents/:id'));

  t.match(router.match('GET', '/api/user/phone-numbers/all'), { kind: 'found', route: { path: '/api/user/phone-numbers/all' }, params: {} });
  t.match(router.match('DELETE', '/api/user/phone-numbers/42'), { kind: 'found', params: { id: '42' } });
  t.match(router.match('GET', '/api/user/knowledgebases/7/documents/9/'), { kind: 'found', params: { kb: '7', id: '9' } });
  t.match(router.match('GET', '//api//user/knowledgebases/a%20b/documents/9'), { kind: 'found', params: { kb: 'a b' } });
  t.same(router.match('POST', '/api/user/knowledgebases/7/documents/9'), { kind: 'method_not_allowed', allowed: ['GET', 'PUT'] });
  t.same(router.match('GET', '/api/user/knowledgebases/7'), { kind: 'not_found' });
  t.same(router.match('GET', '/api/user/phone-numbers/all/extra'), { kind: 'not_found' });
  t.same(router.match('GET', '/api/user/phone-numbers/%E0%A4%A'), { kind: 'not_found' });
  t.equal(router.routes().length, 4);
});

t.test('registration conflicts', async (t) => {
  const router = new Router();
  router.add(route('GET', '/a/:id'));
  t.throws(() => router.add(route('GET', '/a/:other/b')), /conflicts/);
  t.throws(() => router.add(route('GET', '/a/:id')), /duplicate/);
});
