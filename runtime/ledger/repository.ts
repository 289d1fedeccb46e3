import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export interface LedgerEntryInput {
  readonly userId: number;
  /** USD, positive credits, negative debits; at most six decimals. */
  readonly amount: number;
  readonly kind: string;
  readonly reason?: string | null;
  /** Unique per kind: the same charge is never posted twice. */
  readonly reference?: string | null;
}

/**
 * Inserts one ledger row; a database trigger moves the cached balance in the same statement
 * and refuses a negative result.
 * @returns the balance after the entry.
 */
export async function insertLedgerEntry(db: CommonQueryMethods, entry: LedgerEntryInput): Promise<number> {
  return db.oneFirst(sql.type(z.object({ balance_after: z.number() }))`
    INSERT INTO ledger_entries (user_id, amount, balance_after, kind, reason, reference)
    VALUES (${entry.userId}, ${entry.amount.toFixed(6)}, 0, ${entry.kind}, ${entry.reason ?? null}, ${entry.reference ?? null})
    RETURNING balance_after`);
}

export async function ledgerSum(db: CommonQueryMethods, userId: number): Promise<number> {
  return db.oneFirst(sql.type(z.object({ sum: z.number() }))`
    SELECT coalesce(sum(amount), 0)::numeric AS sum FROM ledger_entries WHERE user_id = ${userId}`);
}

/** Whether an operator's adjustment with this ledger reference was posted already. */
export async function adminAdjustmentPosted(db: CommonQueryMethods, reference: string): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM ledger_entries WHERE reference = ${reference} AND kind IN ('admin_credit', 'admin_debit')`);
}

/** Every debit ever posted, summed by kind (positive USD), across all users. */
export async function debitsByKind(db: CommonQueryMethods): Promise<ReadonlyArray<{ kind: string; total: number }>> {
  return db.any(sql.type(z.object({ kind: z.string(), total: z.number() }))`
    SELECT kind, (-sum(amount))::float8 AS total FROM ledger_entries WHERE amount < 0 GROUP BY kind`);
}
