import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import { isBlockedAddress } from './addresses.js';

export { isBlockedAddress };

/**
 * The one way the platform fetches a user-supplied URL (website crawling, mid-call tools,
 * webhooks). Only http and https; the host is resolved and every address is checked against
 * loopback, private, link-local, CGNAT, multicast, reserved and metadata ranges (IPv4 and IPv6,
 * every IPv6 form that carries IPv4 included: see addresses.ts); the connection is pinned to the
 * checked address so a second DNS answer cannot slip past (rebinding); redirects are followed by
 * hand and each hop is checked again; bodies and time are capped.
 */

export interface OutboundPolicy {
  /** Turns the private-range refusal off (local development and the test suite). */
  readonly allowPrivate: boolean;
  /** Hosts exempt from the private-range refusal, e.g. an internal CRM. */
  readonly allowHosts: ReadonlySet<string>;
}

export class OutboundError extends Error {
  override readonly name = 'OutboundError';
  constructor(
    message: string,
    /** Worth retrying later (timeouts, connection failures, 5xx are decided by the caller). */
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
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

export function createOutboundFetch(policy: OutboundPolicy): OutboundFetch {
  async function resolve(url: URL, deadline: AbortSignal): Promise<{ address: string; family: number }> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundError(`Only http and https URLs can be fetched (${url.protocol})`, false);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    let addresses: Array<{ address: string; family: number }>;
    if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
    else {
      // A resolver that never answers must not hold the request past its time limit.
      const timedOut = new Promise<never>((_, reject) => {
        const abort = () => reject(new OutboundError(`Timed out resolving ${host}`, true));
        if (deadline.aborted) abort();
        else deadline.addEventListener('abort', abort, { once: true });
      });
      try {
        addresses = await Promise.race([dnsLookup(host, { all: true, verbatim: true }), timedOut]);
      } catch (cause) {
        if (cause instanceof OutboundError) throw cause;
        throw new OutboundError(`Could not resolve ${host}`, true, { cause });
      }
    }
    const exempt = policy.allowPrivate || policy.allowHosts.has(host.toLowerCase());
    if (!exempt && addresses.some((a) => isBlockedAddress(a.address))) {
      throw new OutboundError(`${host} resolves to a private or reserved address, which is not allowed`, false);
    }
    const first = addresses[0];
    if (!first) throw new OutboundError(`Could not resolve ${host}`, true);
    return first;
  }

  return async function outboundFetch(rawUrl, init = {}) {
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
}
