/**
 * The outbound-URL guard (address classifications only: no traffic leaves loopback):
 * 1. every address form that reaches a private, loopback, link-local, CGNAT, multicast,
 *    unspecified, metadata or reserved host is refused: IPv4 ranges, IPv6 ranges, and every IPv6
 *    form that carries an IPv4 (mapped, IPv4-compatible, SIIT, NAT64 well-known and local-use,
 *    6to4, Teredo); public addresses, also mapped or behind the well-known NAT64 prefix, pass.
 * 2. unusual IPv4 spellings (decimal, octal, hex, short) become 127.0.0.1 in the URL parser, and
 *    the guard refuses them before connecting; as raw strings they are not addresses and refused.
 * 3. with the refusal on, a local server is not reachable (by IP or by name); allowed hosts are.
 * 4. every redirect is checked again: an allowed host redirecting to a refused address is stopped.
 * 5. only http(s); redirects are capped; bodies are capped or refused; time is capped.
 * 6. the caller's headers (credentials) do not follow a redirect to another origin.
 * 7. the check before a URL is stored: literal addresses and localhost names refused without a
 *    resolver; a name refused when any address it resolves to is; a name that does not resolve, or
 *    not within the bound, passes; OUTBOUND_ALLOW_PRIVATE and OUTBOUND_ALLOW_HOSTS exempt; a name
 *    DNS does not know is asked as the fetch asks it (/etc/hosts, search domains).
 * 8. a refusal is logged (warn) with the request's subject, the host, the address and the reason,
 *    never the path, query or headers; a request that names no subject is not logged.
 */
import { readFile } from 'node:fs/promises';
import t from 'tap';
import { createLogger } from '../runtime/logger.js';
import { createDestinationCheck, createOutboundFetch, isBlockedAddress } from '../runtime/net/outbound.js';
import { fakeResolver } from './helpers/resolver.js';
import { startSite } from './helpers/site.js';

/** Refused addresses, each named after the range or form it stands for. */
const REFUSED: ReadonlyArray<readonly [string, string]> = [
  ['0.0.0.0', 'this network 0/8'],
  ['0.1.2.3', 'this network 0/8'],
  ['10.1.2.3', 'private 10/8'],
  ['100.64.0.1', 'CGNAT 100.64/10'],
  ['100.127.255.254', 'CGNAT 100.64/10, last'],
  ['100.100.100.200', 'metadata in CGNAT'],
  ['127.0.0.1', 'loopback 127/8'],
  ['127.255.255.254', 'loopback 127/8'],
  ['169.254.169.254', 'metadata, link-local 169.254/16'],
  ['172.16.0.1', 'private 172.16/12'],
  ['172.31.255.255', 'private 172.16/12, last'],
  ['192.0.0.170', 'IETF protocol assignments 192.0.0/24'],
  ['192.0.2.1', 'TEST-NET-1 192.0.2/24'],
  ['192.88.99.1', '6to4 relay anycast 192.88.99/24'],
  ['192.168.1.1', 'private 192.168/16'],
  ['198.18.0.1', 'benchmarking 198.18/15'],
  ['198.19.255.255', 'benchmarking 198.18/15, last'],
  ['198.51.100.7', 'TEST-NET-2 198.51.100/24'],
  ['203.0.113.9', 'TEST-NET-3 203.0.113/24'],
  ['224.0.0.1', 'multicast 224/4'],
  ['239.255.255.250', 'multicast 224/4'],
  ['240.0.0.1', 'reserved 240/4'],
  ['255.255.255.255', 'broadcast'],
  ['::', 'unspecified'],
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback, long form'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback, dotted'],
  ['::ffff:7f00:1', 'IPv4-mapped loopback, hex'],
  ['0:0:0:0:0:ffff:7f00:1', 'IPv4-mapped loopback, long form'],
  ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
  ['::ffff:a00:1', 'IPv4-mapped 10.0.0.1'],
  ['::7f00:1', 'IPv4-compatible ::/96 (deprecated) carrying 127.0.0.1'],
  ['::127.0.0.1', 'IPv4-compatible, dotted'],
  ['::8.8.8.8', 'IPv4-compatible carrying a public address'],
  ['::ffff:0:7f00:1', 'SIIT ::ffff:0:0:0/96 carrying 127.0.0.1'],
  ['::ffff:0:a00:1', 'SIIT carrying 10.0.0.1'],
  ['64:ff9b::a00:1', 'NAT64 64:ff9b::/96 carrying 10.0.0.1'],
  ['64:ff9b::127.0.0.1', 'NAT64 carrying loopback, dotted'],
  ['64:ff9b::a9fe:a9fe', 'NAT64 carrying metadata'],
  ['64:ff9b:1::a00:1', 'NAT64 local-use 64:ff9b:1::/48'],
  ['64:ff9b:1:ffff::1', 'NAT64 local-use, elsewhere in the /48'],
  ['2002:7f00:1::', '6to4 carrying 127.0.0.1'],
  ['2002:a00:1::', '6to4 carrying 10.0.0.1'],
  ['2002:a9fe:a9fe::1', '6to4 carrying metadata'],
  ['2002:808:808::1', '6to4 carrying a public address (2002::/16 refused as a whole)'],
  ['2001::1', 'Teredo 2001::/32'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo with an obfuscated client'],
  ['2001:2::1', 'benchmarking 2001:2::/48'],
  ['2001:10::1', 'ORCHID 2001:10::/28'],
  ['2001:1f::1', 'ORCHID, last /32 of the /28'],
  ['2001:20::1', 'ORCHIDv2 2001:20::/28'],
  ['2001:db8::1', 'documentation 2001:db8::/32'],
  ['3fff::1', 'documentation 3fff::/20'],
  ['100::1', 'discard 100::/64'],
  ['fc00::1', 'unique local fc00::/7'],
  ['fd00:ec2::254', 'unique local (a cloud metadata address)'],
  ['fe80::1', 'link-local fe80::/10'],
  ['fe80::1%eth0', 'link-local with a zone'],
  ['febf::1', 'link-local, last'],
  ['fec0::1', 'site-local fec0::/10 (deprecated)'],
  ['ff02::1', 'multicast ff00::/8'],
  ['5f00::1', 'SRv6 5f00::/16'],
  ['4000::1', 'unallocated, outside 2000::/3'],
  ['not-an-ip', 'not an address'],
  ['2130706433', 'decimal spelling, not an address as such'],
  ['0177.0.0.1', 'octal spelling, not an address as such'],
  ['0x7f.1', 'hex spelling, not an address as such'],
  ['127.1', 'short spelling, not an address as such'],
];

const ALLOWED = ['93.184.216.34', '8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2001:4860:4860::8888', '2001:200::1', '::ffff:8.8.8.8', '64:ff9b::808:808', '64:ff9b::8.8.8.8'];

t.test('address ranges', async (t) => {
  for (const [address, form] of REFUSED) t.ok(isBlockedAddress(address), `${address} refused (${form})`);
  for (const address of ALLOWED) t.notOk(isBlockedAddress(address), `${address} allowed`);
});

t.test('unusual IPv4 spellings reach the guard as the address they spell', async (t) => {
  const strict = createOutboundFetch({ allowPrivate: false, allowHosts: new Set() });
  for (const host of ['2130706433', '0177.0.0.1', '0x7f.1', '127.1', '0x7f000001', '017700000001', '127.0.0.1.']) {
    const url = `http://${host}:9/x`;
    t.equal(new URL(url).hostname, '127.0.0.1', `${host} parses as 127.0.0.1`);
    await t.rejects(strict(url), { name: 'OutboundRefusal', address: '127.0.0.1' }, `${host} refused before connecting`);
  }
  for (const host of ['[::ffff:127.0.0.1]', '[0:0:0:0:0:ffff:7f00:1]', '[::127.0.0.1]', '[::ffff:0:7f00:1]', '[2002:7f00:1::]', '[64:ff9b::7f00:1]', '[64:ff9b:1::a00:1]', '[2001::1]', '[fe80::1]', '[::]']) {
    await t.rejects(strict(`http://${host}:9/x`), { name: 'OutboundRefusal' }, `${host} refused before connecting`);
  }
});

t.test('refusal of local addresses and its exemptions', async (t) => {
  const site = await startSite(t);
  const port = new URL(site.origin).port;
  site.route('/hello', { type: 'text/plain', body: 'hi' });
  site.route('/to-loopback', { status: 302, headers: { location: `http://127.0.0.1:${port}/hello` } });

  const strict = createOutboundFetch({ allowPrivate: false, allowHosts: new Set() });
  await t.rejects(strict(`${site.origin}/hello`), { name: 'OutboundRefusal', message: /private or reserved address/, retryable: false });
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

t.test('the check before a URL is stored', async (t) => {
  const resolver = fakeResolver({
    'public.example': ['93.184.216.34', '2606:2800:220:1::1'],
    'mixed.example': ['93.184.216.34', '10.0.0.5'],
    'mapped.example': ['2606:2800:220:1::1', '::ffff:127.0.0.1'],
    'crm.internal': ['10.0.0.7'],
    'slow.example': 'never',
  });
  const strict = createDestinationCheck({ allowPrivate: false, allowHosts: new Set(['crm.internal']) }, { lookup: resolver, timeoutMs: 100 });

  for (const url of ['http://127.0.0.1/x', 'http://[::ffff:7f00:1]/', 'http://[2002:a00:1::]/', 'http://2130706433/', 'http://0x7f.1/', 'http://169.254.169.254/latest/meta-data/', 'http://localhost:8080/', 'http://LOCALHOST./', 'http://api.localhost/']) {
    t.equal(await strict(url), true, `${url} refused`);
  }
  t.same(resolver.asked, [], 'literal addresses and localhost names are refused without a resolver');

  t.equal(await strict('https://mixed.example/hook'), true, 'one private address among public ones refuses the name');
  t.equal(await strict('https://mapped.example/hook'), true, 'an IPv4-mapped loopback answer refuses the name');
  t.equal(await strict('https://public.example/hook'), false, 'public addresses pass');
  t.equal(await strict('https://gone.example/hook'), false, 'a name that does not resolve passes (checked again at fetch time)');
  const started = Date.now();
  t.equal(await strict('https://slow.example/hook'), false, 'a resolver that does not answer in time: passes');
  t.ok(Date.now() - started < 2_000, 'within the bound');
  t.equal(await strict('https://crm.internal/api'), false, 'an OUTBOUND_ALLOW_HOSTS host is exempt');
  t.equal(await strict('http://93.184.216.34/'), false, 'a public literal passes');

  const open = createDestinationCheck({ allowPrivate: true, allowHosts: new Set() }, { lookup: resolver });
  for (const url of ['http://127.0.0.1:9/x', 'http://localhost/', 'https://mixed.example/']) t.equal(await open(url), false, `${url} passes with OUTBOUND_ALLOW_PRIVATE`);
});

/** A name of this machine's /etc/hosts (not localhost, refused without asking) that points to a private address. */
const hostsEntry = (await readFile('/etc/hosts', 'utf8').catch(() => ''))
  .split('\n')
  .map((line) => line.replace(/#.*/, '').trim().split(/\s+/))
  .map(([address, ...names]) => ({ address: address ?? '', name: names.find((n) => n && !/localhost$/.test(n)) }))
  .find((entry) => entry.name && isBlockedAddress(entry.address));

t.test('the check before a URL is stored asks a name DNS does not know the way the fetch will (/etc/hosts)', { skip: !hostsEntry && 'no private name in /etc/hosts besides localhost' }, async (t) => {
  const check = createDestinationCheck({ allowPrivate: false, allowHosts: new Set() });
  t.equal(await check(`http://${hostsEntry!.name}/orders`), true, `${hostsEntry!.name} (${hostsEntry!.address} in /etc/hosts) is refused before it is stored, as the fetch would refuse it`);
});

t.test('a refusal is logged with its subject, never with the URL', async (t) => {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  const resolver = fakeResolver({ 'crm.example': ['93.184.216.34', '127.0.0.1'] });
  const fetch = createOutboundFetch({ allowPrivate: false, allowHosts: new Set() }, { logger, lookup: resolver });
  const url = 'http://crm.example:9/orders/A-17?api_key=secret-in-query';
  await t.rejects(fetch(url, { headers: { authorization: 'Bearer tool-secret' }, subject: { userId: 7, toolId: 42 } }), { name: 'OutboundRefusal', retryable: false });
  t.equal(lines.length, 1);
  t.same(lines[0], { level: 40, time: lines[0]!.time, userId: 7, toolId: 42, host: 'crm.example', address: '127.0.0.1', reason: 'reserved address', msg: 'outbound request refused' });
  t.notMatch(JSON.stringify(lines), /secret|orders|A-17|api_key/, 'no path, query or header in the log');

  await t.rejects(fetch('http://localhost:9/', { subject: { userId: 7, assistantId: 3, deliveryId: 'd-1' } }), { name: 'OutboundRefusal' });
  t.match(lines[1], { userId: 7, assistantId: 3, deliveryId: 'd-1', host: 'localhost', reason: 'local name', msg: 'outbound request refused' });
  await t.rejects(fetch('http://127.0.0.1:9/'), { name: 'OutboundRefusal' });
  t.equal(lines.length, 2, 'a request without a subject is refused without a log line');
  await t.rejects(fetch('http://gone.example:9/', { subject: { userId: 7, toolId: 42 } }), { name: 'OutboundError', retryable: true });
  t.equal(lines.length, 2, 'a name that does not resolve is no refusal');
});
