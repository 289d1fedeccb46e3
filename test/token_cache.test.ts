import t from 'tap';
import { TokenCache } from '../runtime/auth/tokenCache.js';

/** The bearer-token cache: a short life, a token's own expiry, revocation and a bounded size. */

const digest = (n: number) => Buffer.alloc(32, n);
const principal = (tokenId: number) => ({ userId: 1, tokenId, tokenKind: 'session' as const });

t.test('entries live for the cache lifetime and never past the token expiry', async (t) => {
  let now = 1_000;
  const cache = new TokenCache(() => now, 5_000, 10);
  cache.set(digest(1), principal(1), null, now, cache.ticket());
  cache.set(digest(2), principal(2), now + 2_000, now, cache.ticket());
  now += 1_999;
  t.same(cache.get(digest(2))?.principal, principal(2));
  now += 1;
  t.equal(cache.get(digest(2)), undefined, 'the session expired');
  t.same(cache.get(digest(1))?.principal, principal(1));
  now += 3_000;
  t.equal(cache.get(digest(1)), undefined, 'read from the database again after 5 s');
});

t.test('a revoked token is forgotten; the oldest entry makes room', async (t) => {
  const cache = new TokenCache(() => 0, 5_000, 2);
  cache.set(digest(1), principal(1), null, 0, cache.ticket());
  cache.set(digest(2), principal(2), null, 0, cache.ticket());
  cache.forget(1);
  t.equal(cache.get(digest(1)), undefined);
  cache.set(digest(3), principal(3), null, 0, cache.ticket());
  cache.set(digest(4), principal(4), null, 0, cache.ticket());
  t.equal(cache.get(digest(2)), undefined, 'evicted');
  t.ok(cache.get(digest(3)) && cache.get(digest(4)));
});

t.test('a lookup that overlapped a revocation is not cached', async (t) => {
  const cache = new TokenCache(() => 0, 5_000, 10);
  const ticket = cache.ticket();
  // The token row is read here; meanwhile the key is deleted and forgotten.
  cache.forget(7);
  cache.set(digest(7), principal(7), null, 0, ticket);
  t.equal(cache.get(digest(7)), undefined, 'read again next time, and found revoked');
  cache.set(digest(7), principal(7), null, 0, cache.ticket());
  t.ok(cache.get(digest(7)), 'a lookup after it is cached');
});
