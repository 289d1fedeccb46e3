import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export const userRow = z.object({
  id: z.number(),
  name: z.string(),
  email: z.string(),
  plan: z.enum(['free', 'pro']),
  balance: z.number(),
  created_at: z.string(),
});
export type UserRow = z.infer<typeof userRow>;

const userColumns = sql.fragment`id, name, email, plan, balance, created_at`;

export async function insertUser(db: CommonQueryMethods, input: { name: string; email: string; passwordHash: string }): Promise<UserRow | null> {
  return db.maybeOne(sql.type(userRow)`
    INSERT INTO users (name, email, password_hash)
    VALUES (${input.name}, ${input.email}, ${input.passwordHash})
    ON CONFLICT (lower(email)) DO NOTHING
    RETURNING ${userColumns}`);
}

export async function findUserById(db: CommonQueryMethods, id: number): Promise<UserRow | null> {
  return db.maybeOne(sql.type(userRow)`SELECT ${userColumns} FROM users WHERE id = ${id}`);
}

export async function findCredentialsByEmail(db: CommonQueryMethods, email: string): Promise<{ id: number; password_hash: string } | null> {
  return db.maybeOne(sql.type(z.object({ id: z.number(), password_hash: z.string() }))`
    SELECT id, password_hash FROM users WHERE lower(email) = lower(${email})`);
}

/** The user's balance (USD). */
export async function userBalance(db: CommonQueryMethods, userId: number): Promise<number> {
  return db.oneFirst(sql.type(z.object({ balance: z.number() }))`SELECT balance FROM users WHERE id = ${userId}`);
}

