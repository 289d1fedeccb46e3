import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { TokenKind } from './secrets.js';

export const tokenRow = z.object({
  id: z.number(),
  user_id: z.number(),
  kind: z.enum(['api_key', 'session']),
  name: z.string(),
  token_digest: z.instanceof(Buffer),
  last_used_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  created_at: z.string(),
});
export type TokenRow = z.infer<typeof tokenRow>;

const tokenColumns = sql.fragment`id, user_id, kind, name, token_digest, last_used_at, expires_at, created_at`;

export async function insertToken(
  db: CommonQueryMethods,
  input: { userId: number; kind: TokenKind; name: string; digest: Buffer; expiresAt: string | null },
): Promise<TokenRow> {
  return db.one(sql.type(tokenRow)`
    INSERT INTO access_tokens (user_id, kind, name, token_digest, expires_at)
    VALUES (${input.userId}, ${input.kind}, ${input.name}, ${sql.binary(input.digest)}, ${input.expiresAt})
    RETURNING ${tokenColumns}`);
}

/** The token with this digest, if it has not expired. */
export async function findLiveToken(db: CommonQueryMethods, digest: Buffer): Promise<TokenRow | null> {
  return db.maybeOne(sql.type(tokenRow)`
    SELECT ${tokenColumns} FROM access_tokens
    WHERE token_digest = ${sql.binary(digest)} AND (expires_at IS NULL OR expires_at > now())`);
}

/** Records use at most once a minute per token, so reads do not turn into a write each. */
export async function touchToken(db: CommonQueryMethods, id: number): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE access_tokens SET last_used_at = now()
    WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`);
}

export async function listTokens(db: CommonQueryMethods, userId: number, kind: TokenKind): Promise<readonly TokenRow[]> {
  return db.any(sql.type(tokenRow)`
    SELECT ${tokenColumns} FROM access_tokens WHERE user_id = ${userId} AND kind = ${kind} ORDER BY id`);
}

export async function deleteToken(db: CommonQueryMethods, userId: number, id: number, kind: TokenKind): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    DELETE FROM access_tokens WHERE id = ${id} AND user_id = ${userId} AND kind = ${kind}`);
  return result.rowCount > 0;
}

export async function deleteExpiredSessions(db: CommonQueryMethods): Promise<number> {
  const result = await db.query(sql.unsafe`DELETE FROM access_tokens WHERE kind = 'session' AND expires_at <= now()`);
  return result.rowCount;
}
