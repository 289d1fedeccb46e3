import t from 'tap';
import { TokenCache } from '../runtime/auth/tokenCache.js';

/** The bearer-token cache: a short life, a token's own expiry, revocation and a bounded size. */

const digest = (n: number) => Buffer.alloc(32, n);
const principal = (tokenId: number) => ({ userId: 1, tokenId, tokenKind: 'session' as const });

t.test('entries live for the cache lifetime and never past the token expiry', async (t) => {
  let now = 1_000;
  const cache = new TokenCache(() => now, 5_000, 10);
  cache.set(digest(1), principal(1), null, now);
  cache.set(digest(2), principal(2), now + 2_000, now);
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
  cache.set(digest(1), principal(1), null, 0);
  cache.set(digest(2), principal(2), null, 0);
  cache.forget(1);
  t.equal(cache.get(digest(1)), undefined);
  cache.set(digest(3), principal(3), null, 0);
  cache.set(digest(4), principal(4), null, 0);
  t.equal(cache.get(digest(2)), undefined, 'evicted');
  t.ok(cache.get(digest(3)) && cache.get(digest(4)));
});
