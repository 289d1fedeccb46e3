import type { DatabasePool } from 'slonik';
import { PlatformError, ValidationError } from '../errors.js';
import { createRateLimiter } from '../rateLimit.js';
import type { Logger } from '../logger.js';
import { isoTimestamp } from '../time.js';
import { findCredentialsByEmail, findUserById, insertUser, type UserRow } from '../users/repository.js';
import { deleteToken, findLiveToken, insertToken, touchToken } from './repository.js';
import { TokenCache } from './tokenCache.js';
import { DUMMY_PASSWORD_HASH, hashPassword, newToken, sameDigest, tokenDigest, verifyPassword, type TokenKind } from './secrets.js';

/** Who is calling: the user and the token they used. */
export interface Principal {
  readonly userId: number;
  readonly tokenId: number;
  readonly tokenKind: TokenKind;
}

export interface PublicUser {
  readonly id: number;
  readonly name: string;
  readonly email: string;
  readonly balance: number;
  readonly created_at: string;
}

export interface AuthServiceDeps {
  readonly pool: DatabasePool;
  readonly logger: Logger;
  /** Session token lifetime in milliseconds. */
  readonly sessionTtlMs: number;
  readonly tokens: TokenCache;
  readonly now?: () => number;
}

export function publicUser(row: UserRow): PublicUser {
  return { id: row.id, name: row.name, email: row.email, balance: row.balance, created_at: row.created_at };
}

/** Sign-ins per account: 10 at once, then 5 a minute, whatever the outcome (guessing is slow). */
const SIGN_INS = { capacity: 10, perMinute: 5 } as const;

export function createAuthService({ pool, logger, sessionTtlMs, tokens, now = Date.now }: AuthServiceDeps) {
  const signIns = createRateLimiter(SIGN_INS);
  /** Uses of tokens being recorded, off the path of the requests that made them. */
  const touches = new Set<Promise<unknown>>();
  function touch(tokenId: number): void {
    const touching: Promise<unknown> = touchToken(pool, tokenId)
      .catch((error: unknown) => logger.warn({ err: error, tokenId }, 'could not record token use'))
      .finally(() => touches.delete(touching));
    touches.add(touching);
  }
  async function issueSession(userId: number): Promise<{ token: string; expiresAt: string }> {
    const token = newToken('session');
    const expiresAt = isoTimestamp(now() + sessionTtlMs);
    await insertToken(pool, { userId, kind: 'session', name: 'session', digest: tokenDigest(token), expiresAt });
    return { token, expiresAt };
  }

  return {
    /**
     * Creates a user and a first session token.
     * @throws ValidationError on `email` when the address is taken.
     */
    async register(input: { name: string; email: string; password: string }): Promise<{ user: PublicUser; token: string }> {
      const passwordHash = await hashPassword(input.password);
      const user = await insertUser(pool, { name: input.name, email: input.email.trim(), passwordHash });
      if (!user) throw ValidationError.field('email', 'The email has already been taken.');
      const { token } = await issueSession(user.id);
      logger.info({ userId: user.id }, 'user registered');
      return { user: publicUser(user), token };
    },

    /** @throws PlatformError `invalid_credentials`, after the same work whether or not the user exists. */
    async login(input: { email: string; password: string }): Promise<{ token: string; expiresAt: string }> {
      const verdict = signIns.take(`email:${input.email.trim().toLowerCase()}`);
      if (!verdict.ok) {
        throw new PlatformError('too_many_requests', { message: `Too many sign-in attempts. Try again in ${verdict.retryAfterSeconds} seconds.`, headers: { 'Retry-After': String(verdict.retryAfterSeconds) } });
      }
      const credentials = await findCredentialsByEmail(pool, input.email.trim());
      const valid = await verifyPassword(input.password, credentials?.password_hash ?? DUMMY_PASSWORD_HASH);
      if (!credentials || !valid) throw new PlatformError('invalid_credentials');
      return issueSession(credentials.id);
    },

    /**
     * Revokes the session token in use.
     * @throws PlatformError `bad_request` when the caller used an API key, which is removed through its own operation.
     */
    async logout(principal: Principal): Promise<void> {
      if (principal.tokenKind !== 'session') {
        throw new PlatformError('bad_request', {
          message: 'Only session tokens can be logged out. Delete an API key with DELETE /api/user/api-keys/{id}.',
        });
      }
      await deleteToken(pool, principal.userId, principal.tokenId, 'session');
      tokens.forget(principal.tokenId);
    },

    /** Resolves a bearer token; undefined for unknown, expired or revoked tokens. */
    async authenticate(token: string): Promise<Principal | undefined> {
      if (token.length > 200) return undefined;
      const digest = tokenDigest(token);
      const cached = tokens.get(digest);
      if (cached) {
        if (cached.lastUsedAt < now() - 60_000) {
          cached.lastUsedAt = now();
          touch(cached.principal.tokenId);
        }
        return cached.principal;
      }
      const ticket = tokens.ticket();
      const row = await findLiveToken(pool, digest);
      if (!row || !sameDigest(row.token_digest, digest)) return undefined;
      let lastUsedAt = row.last_used_at === null ? 0 : Date.parse(row.last_used_at);
      if (lastUsedAt < now() - 60_000) {
        lastUsedAt = now();
        touch(row.id);
      }
      const principal: Principal = { userId: row.user_id, tokenId: row.id, tokenKind: row.kind };
      tokens.set(digest, principal, row.expires_at === null ? null : Date.parse(row.expires_at), lastUsedAt, ticket);
      return principal;
    },

    /** Resolves once the token uses being recorded are written (or failed). */
    async settled(): Promise<void> {
      await Promise.all(touches);
    },

    /** @throws PlatformError `unauthenticated` when the user behind a live token is gone. */
    async profile(userId: number): Promise<PublicUser> {
      const user = await findUserById(pool, userId);
      if (!user) throw new PlatformError('unauthenticated');
      return publicUser(user);
    },
  };
}

export type AuthService = ReturnType<typeof createAuthService>;
