import { CheckIntegrityConstraintViolationError, ForeignKeyIntegrityConstraintViolationError, type CommonQueryMethods } from 'slonik';
import { PlatformError } from '../errors.js';
import { insertLedgerEntry, type LedgerEntryInput } from './repository.js';

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
