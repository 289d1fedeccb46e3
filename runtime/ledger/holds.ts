import { sql, type CommonQueryMethods, type DatabasePool, type DatabaseTransactionConnection } from 'slonik';
import { z } from 'zod';

/**
 * Holds on owners' balances (`balance_holds`): what each live call has reserved, whichever process
 * runs it. What an owner can spend besides is the balance less every unexpired hold.
 *
 * Every writer of a hold first locks the owner's `users` row (as every ledger entry does) and only
 * then reads the holds, in a statement of its own: under READ COMMITTED a statement that waited for
 * the lock would otherwise read the holds as they were before the writer it waited for committed.
 */

const amountRow = z.object({ amount: z.number() });

/** Locks the owners' rows, in id order (so two batches over the same owners never deadlock). */
async function lockOwners(tx: DatabaseTransactionConnection, userIds: readonly number[]): Promise<void> {
  await tx.query(sql.unsafe`SELECT id FROM users WHERE id = ANY(${sql.array([...userIds], 'int8')}) ORDER BY id FOR UPDATE`);
}

/** The balance less every unexpired hold (no lock: a figure to refuse early by, not to spend by). */
export async function unreservedBalance(db: CommonQueryMethods, userId: number): Promise<number> {
  return db.oneFirst(sql.type(amountRow)`
    SELECT (u.balance - coalesce((SELECT sum(h.amount) FROM balance_holds h WHERE h.user_id = u.id AND h.expires_at > now()), 0))::float8 AS amount
    FROM users u WHERE u.id = ${userId}`);
}

/**
 * Locks the owner's row and returns the balance less every unexpired hold: until `tx` ends, no
 * hold is raised and no charge posted for them elsewhere.
 */
export async function lockUnreserved(tx: DatabaseTransactionConnection, userId: number): Promise<number> {
  await lockOwners(tx, [userId]);
  return unreservedBalance(tx, userId);
}

/** A new hold for a call; run after {@link lockUnreserved} in the same transaction. */
export async function insertHold(tx: DatabaseTransactionConnection, hold: { callId: number; userId: number; amount: number; expirySeconds: number }): Promise<void> {
  await tx.query(sql.unsafe`
    INSERT INTO balance_holds (call_id, user_id, amount, expires_at)
    VALUES (${hold.callId}, ${hold.userId}, ${hold.amount.toFixed(6)}, now() + make_interval(secs => ${hold.expirySeconds}))`);
}

/**
 * The hold of a call taken over by another process (its stream joined there): kept as it is while
 * unexpired, else `amount` anew; run after {@link lockUnreserved} in the same transaction.
 * @returns what the call holds now.
 */
export async function keepHold(tx: DatabaseTransactionConnection, hold: { callId: number; userId: number; amount: number; expirySeconds: number }): Promise<number> {
  return tx.oneFirst(sql.type(amountRow)`
    INSERT INTO balance_holds (call_id, user_id, amount, expires_at)
    VALUES (${hold.callId}, ${hold.userId}, ${hold.amount.toFixed(6)}, now() + make_interval(secs => ${hold.expirySeconds}))
    ON CONFLICT (call_id) DO UPDATE SET expires_at = excluded.expires_at,
      amount = CASE WHEN balance_holds.expires_at > now() THEN balance_holds.amount ELSE excluded.amount END
    RETURNING amount::float8 AS amount`);
}

/** A live call's hold to raise to `target` (USD), as far as its owner's balance allows. */
export interface HoldRenewal {
  readonly callId: number;
  readonly userId: number;
  readonly target: number;
}

/**
 * Renews the holds of a process's live calls in one transaction: each expires `expirySeconds` from
 * now, and is raised towards its target out of what its owner has not reserved (the balance less
 * the unexpired holds of other calls and the current holds of these), calls of one owner served in
 * id order. A hold is never lowered. A call whose hold is gone (its end was settled elsewhere) is
 * left out of the result.
 * @returns each call's hold (USD) after the renewal.
 */
export async function renewHolds(pool: DatabasePool, renewals: readonly HoldRenewal[], expirySeconds: number): Promise<Map<number, number>> {
  if (renewals.length === 0) return new Map();
  const rows = await pool.transaction(async (tx) => {
    await lockOwners(tx, [...new Set(renewals.map((r) => r.userId))]);
    return tx.any(sql.type(z.object({ call_id: z.number(), amount: z.number() }))`
      WITH wanted AS (
        SELECT * FROM ${sql.unnest(
          renewals.map((r) => [r.callId, r.target.toFixed(6)]),
          ['int8', 'numeric'],
        )} AS w(call_id, target)
      ), held AS (
        SELECT h.call_id, h.user_id, h.amount, greatest(w.target - h.amount, 0) AS want
        FROM balance_holds h JOIN wanted w USING (call_id)
      ), free AS (
        SELECT u.id AS user_id, u.balance
          - coalesce((SELECT sum(o.amount) FROM balance_holds o
                      WHERE o.user_id = u.id AND o.expires_at > now() AND o.call_id NOT IN (SELECT call_id FROM held)), 0)
          - (SELECT sum(amount) FROM held WHERE held.user_id = u.id) AS unreserved
        FROM users u WHERE u.id IN (SELECT user_id FROM held)
      ), granted AS (
        SELECT held.call_id, held.amount + least(held.want, greatest(free.unreserved - coalesce(sum(held.want) OVER (
          PARTITION BY held.user_id ORDER BY held.call_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0), 0)) AS amount
        FROM held JOIN free USING (user_id)
      )
      UPDATE balance_holds b SET amount = g.amount, expires_at = now() + make_interval(secs => ${expirySeconds})
      FROM granted g WHERE b.call_id = g.call_id
      RETURNING b.call_id, b.amount::float8 AS amount`);
  });
  return new Map(rows.map((row) => [row.call_id, row.amount]));
}

/** Drops a call's hold; run in the transaction that charges its end, after the charge (which locks the owner). */
export async function releaseHold(tx: DatabaseTransactionConnection, callId: number): Promise<void> {
  await tx.query(sql.unsafe`DELETE FROM balance_holds WHERE call_id = ${callId}`);
}
