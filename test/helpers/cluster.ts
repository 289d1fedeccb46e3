import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createLogger } from '../../runtime/logger.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../runtime/store/embedded.js';
import { migrate } from '../../runtime/store/migrate.js';

/**
 * A throwaway PostgreSQL cluster with a migrated template database. Used by `test/run.ts` once
 * per run and by a test file run alone; this module must not import tap, because the runner
 * that imports it is not a test.
 */

export const TEMPLATE_DATABASE = 'platform_template';
/** Settings that make a throwaway cluster fast; never used outside tests. */
export const FAST_SETTINGS = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' } as const;

export interface TestCluster {
  readonly adminUrl: string;
  readonly embedded: EmbeddedPostgres;
  readonly directory: string;
  stop(): Promise<void>;
}

/** Starts a throwaway cluster with a migrated template database. */
export async function startTestCluster(): Promise<TestCluster> {
  const directory = await mkdtemp(join(tmpdir(), 'ap-test-pg-'));
  const logger = createLogger('silent');
  const embedded = await startEmbeddedPostgres({ directory: join(directory, 'cluster'), settings: FAST_SETTINGS, ownProcessGroup: false, logger });
  const admin = new pg.Client({ connectionString: embedded.adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${TEMPLATE_DATABASE}`);
  await admin.end();
  await migrate(embedded.urlFor(TEMPLATE_DATABASE), logger);
  return {
    adminUrl: embedded.adminUrl,
    embedded,
    directory,
    async stop() {
      await embedded.stop();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

