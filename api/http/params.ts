import { PlatformError, type ErrorCode } from '../../runtime/errors.js';
import type { ApiRequest } from './types.js';

/**
 * A path id as an integer. Anything that is not a positive 53-bit integer cannot name a row, so
 * it is the resource's not-found error, never a 500 from the database.
 */
export function idParam(req: ApiRequest, name: string, notFound: ErrorCode): number {
  const raw = req.params[name] ?? '';
  if (!/^\d{1,15}$/.test(raw)) throw new PlatformError(notFound);
  const id = Number(raw);
  if (id < 1) throw new PlatformError(notFound);
  return id;
}

/**
 * The id of a resource nested under another (`/knowledgebases/:id/documents/:documentId`): one that
 * cannot name a row is 0, which matches none, so the parent's not-found still answers first.
 */
export function childIdParam(req: ApiRequest, name: string): number {
  const raw = req.params[name] ?? '';
  return /^\d{1,15}$/.test(raw) ? Number(raw) : 0;
}

/** The principal of a route declared with `auth: 'user'`. */
export function userId(req: ApiRequest): number {
  if (!req.principal) throw new PlatformError('unauthenticated');
  return req.principal.userId;
}

/**
 * The client's address: the connection's peer, or with `trustProxy` proxies in front, the address
 * that many hops back in `X-Forwarded-For` (entries a client wrote itself further left are not believed).
 */
export function clientAddress(remote: string, forwardedFor: string | undefined, trustProxy: number): string {
  if (trustProxy === 0 || !forwardedFor) return remote;
  const chain = [...forwardedFor.split(',').map((entry) => entry.trim()).filter(Boolean), remote];
  return chain[Math.max(0, chain.length - 1 - trustProxy)]!;
}
