import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import tap from 'tap';
import { createLogger } from '../../runtime/logger.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../runtime/store/embedded.js';
import { migrate } from '../../runtime/store/migrate.js';

/**
 * Test databases. `npm test` starts one embedded cluster for the whole run and migrates a
 * template database once (test/run.ts); each test file then gets its own database copied from
 * the template in a few milliseconds. A file run alone (`npx tap test/x.test.ts`) starts a
 * private cluster instead, so every file also works by itself.
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
  const embedded = await startEmbeddedPostgres({ directory: join(directory, 'cluster'), settings: FAST_SETTINGS, logger });
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

let privateCluster: Promise<TestCluster> | undefined;

function adminUrl(): Promise<string> {
  const shared = process.env.AP_TEST_PG_ADMIN_URL;
  if (shared) return Promise.resolve(shared);
  if (!privateCluster) {
    privateCluster = startTestCluster();
    // The cluster's process keeps the event loop alive, so it is stopped when the file's root
    // test ends rather than on process exit.
    tap.teardown(() => stopPrivateCluster());
  }
  return privateCluster.then((cluster) => cluster.adminUrl);
}

/** Stops the private cluster of a file run alone (no-op under `npm test`). */
export async function stopPrivateCluster(): Promise<void> {
  const cluster = privateCluster;
  privateCluster = undefined;
  await cluster?.then((c) => c.stop());
}

/** A new, migrated, empty database; returns its connection string. */
export async function freshDatabase(): Promise<string> {
  const url = await adminUrl();
  const name = `t_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE_DATABASE}`);
  } finally {
    await client.end();
  }
  const target = new URL(url);
  target.pathname = `/${name}`;
  return target.toString();
}

/** Runs SQL as the cluster superuser against `databaseUrl`. */
export async function withClient<T>(databaseUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
