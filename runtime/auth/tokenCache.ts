import type { Principal } from './service.js';

interface Entry {
  readonly principal: Principal;
  /** When this entry must be read from the database again. */
  readonly until: number;
  /** The token's own expiry (sessions), ms since the epoch. */
  readonly expiresAt: number | null;
  /** When the token's use was last written (`last_used_at`), ms since the epoch. */
  lastUsedAt: number;
}

/**
 * Bearer tokens resolved in the last few seconds, keyed by their SHA-256 digest, so an
 * authenticated request costs no token query of its own. Revocations made by this process
 * (logout, API key deletion) remove the token at once; the short lifetime bounds how long
 * another process sharing the database could still accept a token revoked elsewhere. A token's
 * own expiry is honoured to the millisecond.
 */
export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  /** Counts revocations: a lookup that overlapped one is not cached (it may have read the token before it went). */
  private revocations = 0;

  constructor(
    private readonly now: () => number,
    private readonly ttlMs = 5_000,
    private readonly maxEntries = 10_000,
  ) {}

  get(digest: Buffer): Entry | undefined {
    const key = digest.toString('latin1');
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const now = this.now();
    if (now >= entry.until || (entry.expiresAt !== null && now >= entry.expiresAt)) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  /** Taken before a token is read from the database, and handed to `set` with what was read. */
  ticket(): number {
    return this.revocations;
  }

  set(digest: Buffer, principal: Principal, expiresAt: number | null, lastUsedAt: number, ticket: number): void {
    if (ticket !== this.revocations) return;
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(digest.toString('latin1'), { principal, until: this.now() + this.ttlMs, expiresAt, lastUsedAt });
  }

  /** The token was revoked. */
  forget(tokenId: number): void {
    this.revocations++;
    for (const [key, entry] of this.entries) if (entry.principal.tokenId === tokenId) this.entries.delete(key);
  }
}
