import { BlockList, isIP } from 'node:net';

/**
 * Which IP addresses the outbound guard refuses: every address that reaches this host, its
 * networks or a reserved range, in IPv4 and in every IPv6 form that carries or stands for IPv4.
 *
 * Addresses are classified as a resolver or a WHATWG URL parser hands them over: canonical dotted
 * IPv4 and any valid IPv6 text (a zone id such as `%eth0` is ignored). Anything else, unusual IPv4
 * spellings like `0177.0.0.1` or `2130706433` included, is not an address and is refused; the URL
 * parser turns those spellings into `127.0.0.1` before the guard sees a URL's host.
 */

/** IANA special-purpose IPv4 ranges that are not globally reachable, plus multicast and 240/4. */
const IPV4_REFUSED: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT shared space (also some clouds' metadata, e.g. 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments (NAT64 discovery, DS-Lite)
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, 255.255.255.255 broadcast included
];

/**
 * Ranges refused inside 2000::/3, the only IPv6 space allocated for global unicast. Everything
 * outside it is refused by rule (see `isBlockedAddress`), so these are the special blocks that
 * sit in the middle of it.
 */
const IPV6_REFUSED_GLOBAL: ReadonlyArray<readonly [string, number]> = [
  // IETF protocol assignments: Teredo 2001::/32 (its client IPv4 is obfuscated, so it cannot be
  // checked), PCP and TURN anycast, benchmarking 2001:2::/48, AMT, AS112, ORCHID 2001:10::/28,
  // ORCHIDv2 2001:20::/28, drone identifiers 2001:30::/28. None is a web endpoint.
  ['2001::', 23],
  ['2001:db8::', 32], // documentation
  // 6to4 (deprecated by RFC 7526): refused as a whole, not only when the IPv4 in bits 16-48 is a
  // refused one: the packet goes through whichever relay answers the anycast route (or a local
  // 6to4 interface that hands it to the embedded IPv4), and no service worth calling lives there.
  ['2002::', 16],
  ['3fff::', 20], // documentation (RFC 9637)
];

function table(entries: ReadonlyArray<readonly [string, number]>, family: 'ipv4' | 'ipv6'): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of entries) list.addSubnet(network, prefix, family);
  return list;
}

const refusedV4 = table(IPV4_REFUSED, 'ipv4');
const refusedV6 = table(IPV6_REFUSED_GLOBAL, 'ipv6');

/** The eight 16-bit groups of a valid IPv6 address (a trailing dotted IPv4 becomes the last two). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const gap = text.indexOf('::');
  if (gap === -1) return parse(text);
  const head = parse(text.slice(0, gap));
  const tail = parse(text.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/**
 * The IPv4 address an IPv6 address stands for, where the translation is one a host or a network
 * of ours would carry out: IPv4-mapped `::ffff:0:0/96` (a dual-stack socket connects to the IPv4
 * host) and the well-known NAT64 prefix `64:ff9b::/96` (RFC 6052; DNS64 writes it for IPv4-only
 * names). Other IPv4-carrying forms are refused whatever they carry.
 */
function translatedIpv4(groups: readonly number[]): string | undefined {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number];
  const mapped = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0xffff;
  const nat64 = g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0;
  if (!mapped && !nat64) return undefined;
  return `${g6 >> 8}.${g6 & 255}.${g7 >> 8}.${g7 & 255}`;
}

/**
 * True when a connection to `address` must be refused.
 * - IPv4: the ranges of `IPV4_REFUSED`.
 * - IPv4-mapped and well-known NAT64 IPv6: as the IPv4 address they carry.
 * - Any other IPv6 outside 2000::/3: refused. That covers `::` and `::1`, IPv4-compatible `::/96`
 *   (deprecated), SIIT `::ffff:0:0:0/96`, local-use NAT64 `64:ff9b:1::/48`, discard `100::/64`,
 *   unique-local `fc00::/7`, link-local `fe80::/10`, site-local `fec0::/10` (deprecated),
 *   multicast `ff00::/8`, SRv6 `5f00::/16` and every range not yet allocated.
 * - IPv6 inside 2000::/3: the ranges of `IPV6_REFUSED_GLOBAL`.
 * - Anything that is not an IP address: refused.
 */
export function isBlockedAddress(address: string): boolean {
  if (isIP(address) === 4) return refusedV4.check(address, 'ipv4');
  const bare = address.replace(/%[^%]*$/, '');
  if (isIP(bare) !== 6) return true;
  const groups = ipv6Groups(bare.toLowerCase());
  const v4 = translatedIpv4(groups);
  if (v4 !== undefined) return refusedV4.check(v4, 'ipv4');
  if ((groups[0]! & 0xe000) !== 0x2000) return true;
  return refusedV6.check(bare, 'ipv6');
}

/** True for an address of this host's loopback interface: 127.0.0.0/8, `::1`, or IPv4-mapped `::ffff:127.x.y.z` (a zone id is ignored). */
export function isLoopbackAddress(address: string): boolean {
  if (isIP(address) === 4) return address.startsWith('127.');
  const bare = address.replace(/%[^%]*$/, '');
  if (isIP(bare) !== 6) return false;
  const groups = ipv6Groups(bare.toLowerCase());
  const zeros = (count: number) => groups.slice(0, count).every((group) => group === 0);
  if (zeros(7) && groups[7] === 1) return true;
  return zeros(5) && groups[5] === 0xffff && groups[6]! >> 8 === 127;
}
