/**
 * The outbound-URL guard:
 * 1. private, loopback, link-local, CGNAT, multicast, metadata and reserved addresses are refused,
 *    in IPv4, IPv6, IPv4-mapped and NAT64 forms; public addresses pass.
 * 2. with the refusal on, a local server is not reachable (by IP or by name); allowed hosts are.
 * 3. every redirect is checked again: an allowed host redirecting to a refused address is stopped.
 * 4. only http(s); redirects are capped; bodies are capped or refused; time is capped.
 * 5. the caller's headers (credentials) do not follow a redirect to another origin.
 */
import t from 'tap';
import { createOutboundFetch, isBlockedAddress } from '../runtime/net/outbound.js';
import { startSite } from './helpers/site.js';

t.test('address ranges', async (t) => {
  for (const address of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fd00::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '64:ff9b::a00:1', 'not-an-ip']) {
    t.ok(isBlockedAddress(address), `${address} refused`);
  }
  for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
    t.notOk(isBlockedAddress(address), `${address} allowed`);
  }
});

t.test('refusal of local addresses and its exemptions', async (t) => {
  const site = await startSite(t);
  const port = new URL(site.origin).port;
  site.route('/hello', { type: 'text/plain', body: 'hi' });
  site.route('/to-loopback', { status: 302, headers: { location: `http://127.0.0.1:${port}/hello` } });

  const strict = createOutboundFetch({ allowPrivate: false, allowHosts: new Set() });
  await t.rejects(strict(`${site.origin}/hello`), { name: 'OutboundError', message: /private or reserved address/, retryable: false });
  await t.rejects(strict(`http://localhost:${port}/hello`), { message: /private or reserved address/ });
  t.same(site.requests, [], 'nothing reached the server');

  const exempt = createOutboundFetch({ allowPrivate: false, allowHosts: new Set(['localhost']) });
  const ok = await exempt(`http://localhost:${port}/hello`);
  t.same([ok.status, ok.body.toString()], [200, 'hi']);
  await t.rejects(exempt(`http://localhost:${port}/to-loopback`), { message: /127\.0\.0\.1 resolves to a private/ }, 'the redirect hop is checked too');

  const open = createOutboundFetch({ allowPrivate: true, allowHosts: new Set() });
  const followed = await open(`${site.origin}/to-loopback`);
  t.same([followed.status, followed.body.toString(), followed.url], [200, 'hi', `http://127.0.0.1:${port}/hello`]);
});

t.test('limits', async (t) => {
  const site = await startSite(t);
  const fetch = createOutboundFetch({ allowPrivate: true, allowHosts: new Set() });
  site.route('/loop', { status: 301, headers: { location: '/loop' } });
  site.route('/big', { type: 'text/plain', body: 'x'.repeat(10_000) });
  site.route('/slow', { type: 'text/plain', body: 'late', delayMs: 2_000 });
  site.route('/post', (req) => ({ type: 'text/plain', body: req.method }));

  await t.rejects(fetch(`${site.origin}/loop`), { message: /Too many redirects/ });
  await t.rejects(fetch('ftp://example.com/file'), { message: /Only http and https/ });
  await t.rejects(fetch('not a url'), { message: /Not a valid URL/ });
  const cut = await fetch(`${site.origin}/big`, { maxBytes: 1000 });
  t.same([cut.body.length, cut.truncated], [1000, true]);
  await t.rejects(fetch(`${site.origin}/big`, { maxBytes: 1000, refuseOversize: true }), { message: /larger than 1000 bytes/ });
  await t.rejects(fetch(`${site.origin}/slow`, { timeoutMs: 200 }), { message: /Timed out/, retryable: true });
  t.equal((await fetch(`${site.origin}/post`, { method: 'POST', body: '{}' })).body.toString(), 'POST');
});

t.test('the caller\'s headers do not follow a redirect to another origin', async (t) => {
  const first = await startSite(t);
  const other = await startSite(t);
  const echo = (req: import('node:http').IncomingMessage) => ({ type: 'application/json', body: JSON.stringify(req.headers) });
  first.route('/echo', echo);
  other.route('/echo', echo);
  first.route('/same', { status: 302, headers: { location: '/echo' } });
  first.route('/away', { status: 302, headers: { location: `${other.origin}/echo` } });
  const fetch = createOutboundFetch({ allowPrivate: true, allowHosts: new Set() });
  const headers = { authorization: 'Bearer tool-secret', 'x-api-key': 'key-123', 'content-type': 'application/json', accept: 'application/json' };
  const same = JSON.parse((await fetch(`${first.origin}/same`, { headers })).body.toString());
  t.match(same, { authorization: 'Bearer tool-secret', 'x-api-key': 'key-123' }, 'kept on the same origin');
  const away = JSON.parse((await fetch(`${first.origin}/away`, { headers })).body.toString());
  t.notOk('authorization' in away || 'x-api-key' in away, 'dropped for another origin');
  t.match(away, { 'content-type': 'application/json', accept: 'application/json' }, 'neutral ones kept');
});
