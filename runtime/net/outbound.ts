import { Resolver, lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import type { Logger } from '../logger.js';
import { isBlockedAddress } from './addresses.js';

export { isBlockedAddress };

/**
 * The one way the platform fetches a user-supplied URL (website crawling, mid-call tools,
 * webhooks). Only http and https; the host is resolved and every address is checked against
 * loopback, private, link-local, CGNAT, multicast, reserved and metadata ranges (IPv4 and IPv6,
 * every IPv6 form that carries IPv4 included: see addresses.ts); the connection is pinned to the
 * checked address so a second DNS answer cannot slip past (rebinding); redirects are followed by
 * hand and each hop is checked again; bodies and time are capped. The same check answers, before a
 * URL is stored, whether it would be refused now (`createDestinationCheck`).
 */

export interface OutboundPolicy {
  /** Turns the private-range refusal off (local development and the test suite). */
  readonly allowPrivate: boolean;
  /** Hosts exempt from the private-range refusal, e.g. an internal CRM (lower case). */
  readonly allowHosts: ReadonlySet<string>;
}

export class OutboundError extends Error {
  override readonly name: string = 'OutboundError';
  constructor(
    message: string,
    /** Worth retrying later (timeouts, connection failures, 5xx are decided by the caller). */
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The guard refused the destination (never retryable; the same URL is refused again). */
export class OutboundRefusal extends OutboundError {
  override readonly name = 'OutboundRefusal';
  constructor(
    /** The URL's host, as the guard compares it. */
    readonly host: string,
    /** `local name`: localhost or *.localhost; `reserved address`: the host is or resolves to one. */
    readonly reason: 'local name' | 'reserved address',
    /** The refused address, when the host resolved to one. */
    readonly address?: string,
  ) {
    super(`${host} resolves to a private or reserved address, which is not allowed`, false);
  }
}

export interface ResolvedAddress {
  readonly address: string;
  readonly family: number;
}

/** Every address a host name resolves to; rejects when it resolves to none. */
export type HostLookup = (host: string) => Promise<ResolvedAddress[]>;

const systemLookup: HostLookup = (host) => dnsLookup(host, { all: true, verbatim: true });

/** A URL's host as the policy compares it: lower case, without IPv6 brackets or a trailing dot. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase();
}

/** Names that always mean this machine (RFC 6761), refused without asking a resolver. */
function isLocalName(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost');
}

/**
 * The addresses a request to `url` may connect to, every one of them checked against the policy
 * (one refused address refuses the host: the connection could land on any of them).
 * @throws OutboundRefusal when the host is refused;
 *   OutboundError (retryable) when the name does not resolve, or not before `deadline`.
 */
async function checkedAddresses(policy: OutboundPolicy, lookup: HostLookup, url: URL, deadline: AbortSignal): Promise<ResolvedAddress[]> {
  const literal = url.hostname.replace(/^\[|\]$/g, '');
  const host = hostOf(url);
  const exempt = policy.allowPrivate || policy.allowHosts.has(host);
  if (!exempt && isLocalName(host)) throw new OutboundRefusal(host, 'local name');
  let addresses: ResolvedAddress[];
  if (isIP(literal)) addresses = [{ address: literal, family: isIP(literal) }];
  else {
    // A resolver that never answers must not hold the request past its time limit.
    const timedOut = new Promise<never>((_, reject) => {
      const abort = () => reject(new OutboundError(`Timed out resolving ${literal}`, true));
      if (deadline.aborted) abort();
      else deadline.addEventListener('abort', abort, { once: true });
    });
    try {
      addresses = await Promise.race([lookup(literal), timedOut]);
    } catch (cause) {
      if (cause instanceof OutboundError) throw cause;
      throw new OutboundError(`Could not resolve ${literal}`, true, { cause });
    }
  }
  const refused = exempt ? undefined : addresses.find((a) => isBlockedAddress(a.address));
  if (refused) throw new OutboundRefusal(host, 'reserved address', refused.address);
  if (addresses.length === 0) throw new OutboundError(`Could not resolve ${literal}`, true);
  return addresses;
}

/**
 * Whether the guard would refuse a URL now, for a service that stores one (a tool's endpoint, a
 * webhook URL). True only for a certain refusal: a local name, an address literal in a refused
 * range, or a name that resolves (within `timeoutMs`) to at least one refused address, the rule
 * the fetch applies. A name that does not resolve, or not in time, passes: the network may be away
 * now, and every fetch is checked again.
 */
export type DestinationCheck = (url: string) => Promise<boolean>;

/**
 * The resolver of the check before a URL is stored: DNS asked directly first (c-ares, on the event
 * loop, one try cut at `timeoutMs`), so a slow name server cannot hold the libuv threads that
 * getaddrinfo runs on (shared with files and crypto) for every tool a client creates. A name DNS
 * does not know is then asked the way the fetch will ask it (getaddrinfo: /etc/hosts, search
 * domains, such as `http://crm` or a cluster's service name), so what the fetch would refuse is
 * refused here too; only such names cost a thread.
 */
function directDnsLookup(timeoutMs: number): HostLookup {
  const resolver = new Resolver({ timeout: timeoutMs, tries: 1 });
  return async (host) => {
    const answers = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const addresses = answers.flatMap((answer) => (answer.status === 'fulfilled' ? answer.value : []));
    if (addresses.length === 0) return systemLookup(host);
    return addresses.map((address) => ({ address, family: isIP(address) }));
  };
}

export function createDestinationCheck(policy: OutboundPolicy, options: { lookup?: HostLookup; timeoutMs?: number } = {}): DestinationCheck {
  const timeoutMs = options.timeoutMs ?? 2_000;
  const lookup = options.lookup ?? directDnsLookup(timeoutMs);
  return async function refuses(rawUrl) {
    if (!URL.canParse(rawUrl)) return false;
    const bound = new AbortController();
    const timer = setTimeout(() => bound.abort(), timeoutMs);
    try {
      await checkedAddresses(policy, lookup, new URL(rawUrl), bound.signal);
      return false;
    } catch (error) {
      return error instanceof OutboundRefusal;
    } finally {
      clearTimeout(timer);
    }
  };
}

/** The 422 message of a stored URL the guard refuses, e.g. `refusedDestinationMessage('endpoint')`. */
export function refusedDestinationMessage(attribute: string): string {
  return `The ${attribute} must not point to a private, loopback or reserved address.`;
}

export interface OutboundRequest {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** Whole exchange, redirects included. @defaultValue 10 000 ms */
  readonly timeoutMs?: number;
  /** Response bodies are cut here (`truncated` tells). @defaultValue 5 MiB */
  readonly maxBytes?: number;
  /** @defaultValue 5 */
  readonly maxRedirects?: number;
  /** Refuse rather than cut bodies over maxBytes. */
  readonly refuseOversize?: boolean;
  /**
   * Whose request this is: the owner's `userId` and the resource's ids (`toolId`, `assistantId`
   * and `deliveryId`, ...). A refusal of a request that names its subject is logged with it (warn,
   * `outbound request refused`); ids only, never a URL, header or body.
   */
  readonly subject?: Readonly<Record<string, string | number | null>>;
}

export interface OutboundResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  readonly truncated: boolean;
  /** After redirects. */
  readonly url: string;
}

export type OutboundFetch = (url: string, init?: OutboundRequest) => Promise<OutboundResponse>;

/** Headers that carry nothing of the caller's: what a request may keep across origins. */
const NEUTRAL_HEADERS = new Set(['accept', 'accept-language', 'content-type', 'user-agent']);

function neutralHeaders(headers: OutboundRequest['headers']): OutboundRequest['headers'] {
  if (!headers) return headers;
  return Object.fromEntries(Object.entries(headers).filter(([name]) => NEUTRAL_HEADERS.has(name.toLowerCase())));
}

export interface OutboundFetchOptions {
  /** Where refusals of requests that name their subject are logged. */
  readonly logger?: Logger;
  /** The resolver (tests answer for names they invent). @defaultValue the system's, through getaddrinfo */
  readonly lookup?: HostLookup;
}

export function createOutboundFetch(policy: OutboundPolicy, options: OutboundFetchOptions = {}): OutboundFetch {
  const lookup = options.lookup ?? systemLookup;

  async function resolve(url: URL, deadline: AbortSignal): Promise<ResolvedAddress> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundError(`Only http and https URLs can be fetched (${url.protocol})`, false);
    return (await checkedAddresses(policy, lookup, url, deadline))[0]!;
  }

  const guarded: OutboundFetch = async function fetchChecked(rawUrl, init = {}) {
    const deadline = AbortSignal.timeout(init.timeoutMs ?? 10_000);
    const maxBytes = init.maxBytes ?? 5 * 1024 * 1024;
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      throw new OutboundError(`Not a valid URL: ${rawUrl}`, false);
    }
    let method = init.method ?? 'GET';
    let body = init.body;
    let requestHeaders = init.headers;
    for (let hop = 0; ; hop++) {
      const target = await resolve(url, deadline);
      // Pin the connection to the address that was checked.
      const pinned: LookupFunction = (_host, options, callback) => {
        if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [target]);
        else callback(null, target.address, target.family);
      };
      const dispatcher = new Agent({ connect: { lookup: pinned }, keepAliveTimeout: 1, keepAliveMaxTimeout: 1 });
      try {
        const response = await request(url, { method: method as 'GET', headers: requestHeaders, body, signal: deadline, dispatcher }).catch((cause: unknown) => {
          const timedOut = deadline.aborted;
          throw new OutboundError(timedOut ? `Timed out fetching ${url.href}` : `Could not connect to ${url.host}: ${(cause as Error).message}`, true, { cause });
        });
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(response.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
        const location = headers.location;
        if (response.statusCode >= 300 && response.statusCode < 400 && location) {
          await response.body.dump();
          if (hop >= (init.maxRedirects ?? 5)) throw new OutboundError(`Too many redirects fetching ${rawUrl}`, false);
          const next = new URL(location, url);
          // Headers the caller set (a tool's API key, a webhook's signature) go to the origin they
          // were meant for, never to another one a redirect names.
          if (next.origin !== url.origin) requestHeaders = neutralHeaders(requestHeaders);
          url = next;
          if (response.statusCode === 303 || ((response.statusCode === 301 || response.statusCode === 302) && method === 'POST')) {
            method = 'GET';
            body = undefined;
          }
          continue;
        }
        const declared = Number(headers['content-length'] ?? NaN);
        if (init.refuseOversize && declared > maxBytes) {
          await response.body.dump();
          throw new OutboundError(`The response of ${url.href} is larger than ${maxBytes} bytes`, false);
        }
        const chunks: Buffer[] = [];
        let size = 0;
        let truncated = false;
        try {
          for await (const chunk of response.body) {
            const buffer = chunk as Buffer;
            if (size + buffer.length > maxBytes) {
              if (init.refuseOversize) throw new OutboundError(`The response of ${url.href} is larger than ${maxBytes} bytes`, false);
              chunks.push(buffer.subarray(0, maxBytes - size));
              size = maxBytes;
              truncated = true;
              break;
            }
            chunks.push(buffer);
            size += buffer.length;
          }
        } catch (error) {
          if (error instanceof OutboundError) throw error;
          throw new OutboundError(deadline.aborted ? `Timed out fetching ${url.href}` : `Failed reading ${url.href}`, true, { cause: error });
        } finally {
          if (truncated) response.body.destroy();
        }
        return { status: response.statusCode, headers, body: Buffer.concat(chunks, size), truncated, url: url.href };
      } finally {
        void dispatcher.close().catch(() => undefined);
      }
    }
  };

  return async function outboundFetch(rawUrl, init = {}) {
    try {
      return await guarded(rawUrl, init);
    } catch (error) {
      if (error instanceof OutboundRefusal && init.subject) {
        options.logger?.warn({ ...init.subject, host: error.host, address: error.address, reason: error.reason }, 'outbound request refused');
      }
      throw error;
    }
  };
}
