/**
 * Users and authentication over real HTTP:
 * 1. register returns 201 with the user and a working session token; a duplicate email is 422 on email.
 * 2. register validates name, email and password (min 8) with Laravel messages.
 * 3. login returns a Bearer session token expiring in 30 days; wrong password and unknown email are 401.
 * 4. GET /user returns the profile; missing, malformed and unknown tokens are 401 "Unauthenticated.".
 * 5. logout revokes the session token in use and no other; an API key cannot be "logged out".
 * 6. sign-ins per account are limited (10, then 5 a minute); password hashes run two at a time with
 *    at most 64 waiting, beyond which sign-ins are refused (503).
 */
import t from 'tap';
import { looksLikeEmail } from '../schemas/rules.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);

t.test('register creates a user with a session token', async (t) => {
  const res = await api.request('POST', '/auth/register', { body: { name: 'Ada', email: 'ada@example.com', password: 'password123' } });
  t.equal(res.status, 201);
  t.match(res.body, { message: String, user: { id: Number, name: 'Ada', email: 'ada@example.com', balance: 0 }, token: /^aps_/ });
  t.notOk('password' in res.body.user, 'no password in the response');
  const me = await api.request('GET', '/user', { token: res.body.token });
  t.equal(me.status, 200);
  t.match(me.body.data, { id: res.body.user.id, name: 'Ada', email: 'ada@example.com', balance: 0, created_at: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/ });

  const again = await api.request('POST', '/auth/register', { body: { name: 'Other', email: 'ADA@example.com', password: 'password123' } });
  t.equal(again.status, 422);
  t.same(again.body, { message: 'The email has already been taken.', errors: { email: ['The email has already been taken.'] } });
});

t.test('register validates its input', async (t) => {
  const res = await api.request('POST', '/auth/register', { body: { name: 'x'.repeat(256), email: 'not-an-email', password: 'short' } });
  t.equal(res.status, 422);
  t.same(res.body.errors, {
    name: ['The name may not be greater than 255 characters.'],
    email: ['The email must be a valid email address.'],
    password: ['The password must be at least 8 characters.'],
  });
  t.equal(res.body.message, 'The name may not be greater than 255 characters. (and 2 more errors)');

  const empty = await api.request('POST', '/auth/register', { body: {} });
  t.equal(empty.status, 422);
  t.same(empty.body.errors.name, ['The name field is required.']);

  const wrongTypes = await api.request('POST', '/auth/register', { body: { name: 12, email: ['a'], password: null } });
  t.equal(wrongTypes.status, 422);
  t.same(wrongTypes.body.errors.name, ['The name must be a string.']);
});

t.test('a long email is refused on its length before any pattern runs (no backtracking on 400 KB)', async (t) => {
  const hostile = `${'@.'.repeat(200_000)} `;
  for (const path of ['/auth/login', '/auth/register']) {
    const res = await api.request('POST', path, { body: { name: 'Eve', email: hostile, password: 'password123' } });
    t.equal(res.status, 422, path);
    t.same(res.body.errors.email, ['The email may not be greater than 255 characters.'], path);
  }
  const notOne = await api.request('POST', '/auth/register', { body: { name: 'Eve', email: 'eve@example', password: 'password123' } });
  t.same(notOne.body.errors, { email: ['The email must be a valid email address.'] });
  // The same addresses as the validator's own pattern, decided in one pass.
  const pattern = /^\S+@\S+\.\S+$/;
  const samples = ['a@b.c', '@b.c', 'a@.c', 'a@b.', 'a@b..', 'a@@b.c', 'a@b@c.d', 'a.b@c', 'a@b.c.', 'a b@c.d', 'a@bc.d\t', '.@a.b', 'a@..b', 'a@b.cd', 'x@y', ''];
  for (let i = 0; i < 2_000; i++) samples.push(Array.from({ length: 1 + (i % 7) }, (_, k) => 'a@. '[(i * 7 + k * 13 + (i >> 3)) % 4]).join(''));
  t.same(samples.filter((value) => looksLikeEmail(value) !== pattern.test(value)), []);
  const fine = await api.request('POST', '/auth/register', { body: { name: 'Eve', email: 'eve+tag@mail.example.co.uk', password: 'password123' } });
  t.equal(fine.status, 201);
});

t.test('login issues a 30-day session token; bad credentials are 401', async (t) => {
  await api.request('POST', '/auth/register', { body: { name: 'Bob', email: 'bob@example.com', password: 'password123' } });
  const before = Date.now();
  const res = await api.request('POST', '/auth/login', { body: { email: 'bob@example.com', password: 'password123' } });
  t.equal(res.status, 200);
  t.equal(res.body.token_type, 'Bearer');
  t.match(res.body.token, /^aps_/);
  const expires = Date.parse(res.body.expires_at);
  t.ok(Math.abs(expires - before - 30 * 24 * 3600 * 1000) < 60_000, 'expires in 30 days');

  const me = await api.request('GET', '/user', { token: res.body.token });
  t.equal(me.body.data.email, 'bob@example.com');

  const wrong = await api.request('POST', '/auth/login', { body: { email: 'bob@example.com', password: 'password124' } });
  t.equal(wrong.status, 401);
  t.same(wrong.body, { message: 'Invalid credentials.' });
  const unknown = await api.request('POST', '/auth/login', { body: { email: 'nobody@example.com', password: 'password123' } });
  t.equal(unknown.status, 401);
  t.same(unknown.body, { message: 'Invalid credentials.' });
  const missing = await api.request('POST', '/auth/login', { body: { email: 'bob@example.com' } });
  t.equal(missing.status, 422);
  t.same(missing.body.errors, { password: ['The password field is required.'] });
});

t.test('protected routes refuse missing and bad tokens', async (t) => {
  for (const authorization of [undefined, 'Bearer', 'Basic abc', 'Bearer aps_doesnotexist', `Bearer ${'x'.repeat(500)}`]) {
    const res = await api.request('GET', '/user', { headers: authorization ? { authorization } : {} });
    t.equal(res.status, 401, String(authorization));
    t.same(res.body, { message: 'Unauthenticated.' });
  }
});

t.test('logout revokes only the token in use', async (t) => {
  const user = await api.user();
  const second = await api.request('POST', '/auth/login', { body: { email: user.email, password: 'correct horse battery' } });
  const out = await api.request('POST', '/auth/logout', { token: user.token });
  t.equal(out.status, 200);
  t.same(out.body, { message: 'Logged out successfully.' });
  t.equal((await api.request('GET', '/user', { token: user.token })).status, 401, 'revoked token refused');
  t.equal((await api.request('POST', '/auth/logout', { token: user.token })).status, 401, 'second logout refused');
  t.equal((await api.request('GET', '/user', { token: second.body.token })).status, 200, 'other session still works');

  const key = await api.request('POST', '/user/api-keys', { token: second.body.token, body: { name: 'ci' } });
  const viaKey = await api.request('POST', '/auth/logout', { token: key.body.api_key.token });
  t.equal(viaKey.status, 400);
  t.match(viaKey.body.message, /Only session tokens/);
  t.equal((await api.request('GET', '/user', { token: key.body.api_key.token })).status, 200, 'api key unaffected');
});

t.test('sign-ins are limited per account, and password hashing per process', async (t) => {
  const email = `guessed-${Date.now()}@example.com`;
  await api.request('POST', '/auth/register', { body: { name: 'Guessed', email, password: 'correct horse battery' } });
  const attempt = (address: string) => api.request('POST', '/auth/login', { body: { email: address, password: 'wrong guess' } });
  for (let i = 0; i < 10; i++) t.equal((await attempt(email)).status, 401);
  const limited = await attempt(email.toUpperCase());
  t.equal(limited.status, 429, 'the eleventh attempt in a minute waits, whatever the case of the address');
  const wait = Number(limited.headers.get('retry-after'));
  t.ok(wait >= 1 && wait <= 12, `for ${wait} s (one attempt every 12 s)`);
  t.match(limited.body, { message: /^Too many sign-in attempts\. Try again in \d+ seconds\.$/ });
  t.equal((await api.request('POST', '/auth/login', { body: { email: 'someone-else@example.com', password: 'x' } })).status, 401, 'other accounts are not affected');

  const { hashPassword, MAX_WAITING_HASHES } = await import('../runtime/auth/secrets.js');
  const settled = await Promise.allSettled(Array.from({ length: MAX_WAITING_HASHES + 12 }, () => hashPassword('flood')));
  const refused = settled.filter((result) => result.status === 'rejected');
  t.equal(refused.length, 10, 'two hash at once, 64 wait, the rest are refused');
  t.match((refused[0] as PromiseRejectedResult).reason, { code: 'service_unavailable', message: 'Too many sign-ins at once. Please try again shortly.' });
});

t.test('an upload with a token that names nobody is refused while it arrives, not after', async (t) => {
  const { request } = await import('node:http');
  const url = new URL(`${api.origin}/api/user/knowledgebases/1/documents`);
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: 'Bearer junk-token', 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(20 * 1024 * 1024) } },
      (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      },
    );
    req.on('error', reject);
    // A first kilobyte, and the rest of the 20 MB never comes: the answer must not wait for it.
    req.write(Buffer.alloc(1024, 97));
  });
  t.equal(status, 401);
});
