import { randomBytes } from 'node:crypto';
import pg from 'pg';
import tap from 'tap';
import { startTestCluster, TEMPLATE_DATABASE, type TestCluster } from './cluster.js';

/**
 * Test databases. `npm test` starts one embedded cluster for the whole run and migrates a
 * template database once (test/run.ts); each test file then gets its own database copied from
 * the template in a few milliseconds. A file run alone (`npx tap test/x.test.ts`) starts a
 * private cluster instead, so every file also works by itself.
 */

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
