import { join } from 'node:path';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { ensureDatabase } from './database.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded.js';
import { migrate } from './migrate.js';

/** The database a platform runs on, migrated: DATABASE_URL's, or the embedded one this process started. */
export interface PreparedDatabase {
  readonly databaseUrl: string;
  /** The embedded PostgreSQL when this process runs it (stopped by whoever prepared it). */
  readonly embedded: EmbeddedPostgres | undefined;
  /** Its data directory, when embedded. */
  readonly embeddedDirectory: string | undefined;
}

/**
 * Starts the embedded PostgreSQL when DATABASE_URL is unset (creating its database) and applies
 * the migrations; a failure stops what was started. Once per start, however many server
 * processes share the database.
 */
export async function prepareDatabase(config: Config, logger: Logger): Promise<PreparedDatabase> {
  let embedded: EmbeddedPostgres | undefined;
  let databaseUrl = config.databaseUrl;
  const directory = join(config.dataDir, 'postgres');
  if (!databaseUrl) {
    embedded = await startEmbeddedPostgres({ directory, settings: config.embeddedPostgresSettings, logger: logger.child({ component: 'postgres' }) });
    databaseUrl = embedded.urlFor('assistant_platform');
  }
  try {
    if (embedded) await ensureDatabase(embedded.urlFor('postgres'), 'assistant_platform');
    const applied = await migrate(databaseUrl, logger);
    logger.info({ applied: applied.length }, 'database migrated');
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
  return { databaseUrl, embedded, embeddedDirectory: embedded ? directory : undefined };
}
