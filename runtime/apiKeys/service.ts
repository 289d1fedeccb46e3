import type { DatabasePool } from 'slonik';
import { deleteToken, insertToken, listTokens } from '../auth/repository.js';
import { newToken, tokenDigest } from '../auth/secrets.js';
import type { TokenCache } from '../auth/tokenCache.js';
import { PlatformError } from '../errors.js';
import type { Logger } from '../logger.js';

export interface ApiKeySummary {
  readonly id: number;
  readonly name: string;
  readonly last_used_at: string | null;
  readonly created_at: string;
}

export function createApiKeyService({ pool, logger, tokens }: { pool: DatabasePool; logger: Logger; tokens: TokenCache }) {
  return {
    /** The token is in this result only; afterwards only its digest exists. */
    async create(userId: number, name: string): Promise<{ id: number; name: string; token: string; created_at: string }> {
      const token = newToken('api_key');
      const row = await insertToken(pool, { userId, kind: 'api_key', name, digest: tokenDigest(token), expiresAt: null });
      logger.info({ userId, apiKeyId: row.id }, 'api key created');
      return { id: row.id, name: row.name, token, created_at: row.created_at };
    },

    async list(userId: number): Promise<ApiKeySummary[]> {
      const rows = await listTokens(pool, userId, 'api_key');
      return rows.map((row) => ({ id: row.id, name: row.name, last_used_at: row.last_used_at, created_at: row.created_at }));
    },

    /** @throws PlatformError `api_key_not_found` for unknown ids and other users' keys. */
    async remove(userId: number, id: number): Promise<void> {
      if (!(await deleteToken(pool, userId, id, 'api_key'))) throw new PlatformError('api_key_not_found');
      tokens.forget(id);
      logger.info({ userId, apiKeyId: id }, 'api key deleted');
    },
  };
}

export type ApiKeyService = ReturnType<typeof createApiKeyService>;
