import pg from 'pg';
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/** Creates database `name` on the server `adminUrl` reaches, unless it exists. */
export async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

/** Resolves once the database answers a query; rejects when it cannot. */
export async function ping(db: CommonQueryMethods): Promise<void> {
  await db.oneFirst(sql.type(z.object({ ok: z.number() }))`SELECT 1 AS ok`);
}
