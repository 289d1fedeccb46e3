import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

const value = z.object({ value: z.instanceof(Buffer) });

/**
 * A key every process on the database shares (`platform_secrets`): made once, by whichever process
 * asks first, from `initial`; processes asking at the same time, and every later one, get the
 * key that was stored, whatever their own `initial` would have given.
 */
export async function sharedSecret(db: CommonQueryMethods, name: string, initial: () => Promise<Buffer>): Promise<Buffer> {
  const read = () => db.maybeOneFirst(sql.type(value)`SELECT value FROM platform_secrets WHERE name = ${name}`);
  const stored = await read();
  if (stored) return stored;
  await db.query(sql.unsafe`INSERT INTO platform_secrets (name, value) VALUES (${name}, ${sql.binary(await initial())}) ON CONFLICT (name) DO NOTHING`);
  const made = await read();
  if (!made) throw new Error(`the shared key ${name} could not be stored`);
  return made;
}
