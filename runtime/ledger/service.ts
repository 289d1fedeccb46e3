import { CheckIntegrityConstraintViolationError, ForeignKeyIntegrityConstraintViolationError, type CommonQueryMethods, type DatabasePool, type DatabaseTransactionConnection } from 'slonik';
import { PlatformError } from '../errors.js';
import { lockUnreserved } from './holds.js';
import { insertLedgerEntry, listLedgerEntries, type LedgerEntryInput, type LedgerFilters } from './repository.js';

/**
 * Posts a balance change. Callers that charge for something do it inside the transaction that
 * records the thing charged for, passing that transaction as `db`.
 * @throws PlatformError `insufficient_balance` when the balance would go below zero;
 *   `user_not_found` when the user does not exist.
 */
export async function postLedgerEntry(db: CommonQueryMethods, entry: LedgerEntryInput): Promise<number> {
  try {
    return await insertLedgerEntry(db, entry);
  } catch (error) {
    if (error instanceof CheckIntegrityConstraintViolationError && error.constraint === 'users_balance_not_negative') throw new PlatformError('insufficient_balance', { cause: error });
    if (error instanceof ForeignKeyIntegrityConstraintViolationError) throw new PlatformError('user_not_found', { cause: error });
    throw error;
  }
}

/**
 * Posts a debit (`entry.amount` < 0) out of what the owner's live calls have not reserved: the
 * balance less their holds must cover it, whichever process runs them.
 * @throws PlatformError `insufficient_balance` when it does not; as {@link postLedgerEntry} otherwise.
 */
export async function postUnreservedDebit(tx: DatabaseTransactionConnection, entry: LedgerEntryInput): Promise<number> {
  if ((await lockUnreserved(tx, entry.userId)) < -entry.amount) throw new PlatformError('insufficient_balance');
  return postLedgerEntry(tx, entry);
}

/** What an owner reads of their ledger (`GET /user/transactions`). */
export function createLedgerService({ pool }: { pool: DatabasePool }) {
  return {
    /** The user's entries, newest first; only theirs (the user id is in every query). */
    async list(userId: number, filters: LedgerFilters, page: number, perPage: number) {
      const { items, total } = await listLedgerEntries(pool, userId, filters, page, perPage);
      return { items, total, page, perPage };
    },
  };
}

export type LedgerService = ReturnType<typeof createLedgerService>;
