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

/** The kinds of ledger entries, as `GET /user/transactions` names them in `type`. */
export const LEDGER_KINDS = ['call', 'conversation_message', 'conversation_refund', 'phone_number', 'admin_credit', 'admin_debit'] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

export interface LedgerFilters {
  readonly type?: LedgerKind;
  /** Inclusive UTC days, `YYYY-MM-DD`. */
  readonly dateFrom?: string;
  readonly dateTo?: string;
}

export const ledgerListRow = z.object({
  id: z.number(),
  type: z.string(),
  /** USD; negative for debits. */
  amount: z.number(),
  /** The user's balance once this entry was posted (stored with the entry by its trigger). */
  balance_after: z.number(),
  description: z.string().nullable(),
  call_id: z.number().nullable(),
  conversation_id: z.string().nullable(),
  phone_number_id: z.number().nullable(),
  phone_number: z.string().nullable(),
  admin_reference: z.string().nullable(),
  created_at: z.string(),
});
export type LedgerListRow = z.infer<typeof ledgerListRow>;

/**
 * A user's ledger entries in the order they were posted, last first (the order their
 * `balance_after` follows), with what each is for, read from its `reference`: a
 * call's id (`call`), a conversation message's id (`conversation_*`), `<phone number id>@<month>`
 * (`phone_number`), `<user id>:<operator's reference>` (`admin_*`). References a kind does not
 * have (older first-month rentals, adjustments without one) and things since deleted read null.
 */
export async function listLedgerEntries(db: CommonQueryMethods, userId: number, filters: LedgerFilters, page: number, perPage: number): Promise<{ items: readonly LedgerListRow[]; total: number }> {
  const conditions = [sql.fragment`l.user_id = ${userId}`];
  if (filters.type) conditions.push(sql.fragment`l.kind = ${filters.type}`);
  if (filters.dateFrom) conditions.push(sql.fragment`l.created_at >= (${filters.dateFrom}::date)::timestamp AT TIME ZONE 'UTC'`);
  if (filters.dateTo) conditions.push(sql.fragment`l.created_at < ((${filters.dateTo}::date + 1)::timestamp AT TIME ZONE 'UTC')`);
  const where = sql.join(conditions, sql.fragment` AND `);
  const [items, total] = await Promise.all([
    db.any(sql.type(ledgerListRow)`
      SELECT l.id, l.kind AS type, l.amount::float8 AS amount, l.balance_after::float8 AS balance_after, l.reason AS description,
        CASE WHEN l.kind = 'call' AND l.reference ~ '^[0-9]+$' THEN l.reference::bigint END AS call_id,
        m.conversation_id::text AS conversation_id,
        CASE WHEN l.kind = 'phone_number' AND l.reference ~ '^[0-9]+@' THEN split_part(l.reference, '@', 1)::bigint END AS phone_number_id,
        p.phone_number,
        CASE WHEN l.kind IN ('admin_credit', 'admin_debit') AND l.reference IS NOT NULL THEN substr(l.reference, strpos(l.reference, ':') + 1) END AS admin_reference,
        l.created_at
      FROM ledger_entries l
      LEFT JOIN LATERAL (
        SELECT conversation_id FROM conversation_messages
        WHERE id = CASE WHEN l.kind IN ('conversation_message', 'conversation_refund') AND l.reference ~ '^[0-9]+$' THEN l.reference::bigint END
      ) m ON true
      LEFT JOIN LATERAL (
        SELECT phone_number FROM phone_numbers
        WHERE user_id = l.user_id AND id = CASE WHEN l.kind = 'phone_number' AND l.reference ~ '^[0-9]+@' THEN split_part(l.reference, '@', 1)::bigint END
      ) p ON true
      WHERE ${where}
      ORDER BY l.id DESC
      LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`),
    db.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM ledger_entries l WHERE ${where}`),
  ]);
  return { items, total };
}
