import { createHash, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { PlatformError } from '../errors.js';

/**
 * Passwords are hashed with scrypt (N=2^15, r=8, p=1, 16-byte salt, 64-byte key), run on libuv's
 * thread pool, never on the event loop, two at a time. Tokens are random 32-byte strings stored only as
 * SHA-256 digests.
 */

const SCRYPT = { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const satisfies ScryptOptions;
const KEY_LENGTH = 64;

/** Hashes at once: scrypt runs on libuv's small thread pool, which file I/O and DNS lookups share. */
const MAX_CONCURRENT_HASHES = 2;
/** Hashes allowed to wait; a flood of sign-ins beyond this is refused (503), not queued without bound. */
export const MAX_WAITING_HASHES = 64;
let hashing = 0;
const waiting: Array<() => void> = [];

async function derive(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  if (hashing < MAX_CONCURRENT_HASHES) hashing++;
  else if (waiting.length >= MAX_WAITING_HASHES) {
    throw new PlatformError('service_unavailable', { message: 'Too many sign-ins at once. Please try again shortly.', headers: { 'Retry-After': '1' } });
  } else await new Promise<void>((resolveTurn) => waiting.push(resolveTurn));
  try {
    return await new Promise((resolveKey, reject) => {
      scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolveKey(key)));
    });
  } finally {
    // The slot passes straight to the next in line, so no newcomer can slip past the limit.
    const next = waiting.shift();
    if (next) next();
    else hashing--;
  }
}

/** Format: `scrypt$N$r$p$<salt base64>$<key base64>`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, SCRYPT);
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64'), key.toString('base64')].join('$');
}

/** Constant-time check; a malformed stored hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !key) return false;
  const expected = Buffer.from(key, 'base64');
  const actual = await derive(password, Buffer.from(salt, 'base64'), { N: Number(n), r: Number(r), p: Number(p), maxmem: SCRYPT.maxmem });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** A hash to compare against when the user does not exist, so timing does not reveal it. */
export const DUMMY_PASSWORD_HASH = `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${Buffer.alloc(16).toString('base64')}$${Buffer.alloc(KEY_LENGTH).toString('base64')}`;

export type TokenKind = 'api_key' | 'session';
const PREFIX: Record<TokenKind, string> = { api_key: 'apk_', session: 'aps_' };

/** A new bearer token; the prefix tells a reader (and a secret scanner) what kind it is. */
export function newToken(kind: TokenKind): string {
  return PREFIX[kind] + randomBytes(32).toString('base64url');
}

export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

export function sameDigest(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
