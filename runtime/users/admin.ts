import { UniqueIntegrityConstraintViolationError, type DatabasePool } from 'slonik';
import { PlatformError, ValidationError } from '../errors.js';
import { adminAdjustmentPosted } from '../ledger/repository.js';
import { postLedgerEntry } from '../ledger/service.js';
import type { Logger } from '../logger.js';
import { findUserById, userBalance } from './repository.js';

/** Operator actions on users, behind ADMIN_TOKEN. */
export function createAdminService({ pool, logger }: { pool: DatabasePool; logger: Logger }) {
  return {
    /**
     * Credits (positive) or debits (negative) a balance through the ledger. With a `reference`, an
     * adjustment sent again (an operator's retry after a timeout) is applied once: the repeat
     * changes nothing and answers the balance as it is, with `applied: false`.
     * @throws PlatformError `user_not_found`; ValidationError on `amount` when a debit would go below zero.
     */
    async adjustBalance(userId: number, amount: number, reason: string, reference?: string): Promise<{ balance: number; applied: boolean }> {
      if (!(await findUserById(pool, userId))) throw new PlatformError('user_not_found');
      const ledgerReference = reference === undefined ? null : `${userId}:${reference}`;
      const current = async () => ({ balance: await userBalance(pool, userId), applied: false });
      if (ledgerReference !== null && (await adminAdjustmentPosted(pool, ledgerReference))) {
        return current();
      }
      try {
        const balance = await postLedgerEntry(pool, { userId, amount, kind: amount > 0 ? 'admin_credit' : 'admin_debit', reason, reference: ledgerReference });
        logger.info({ userId, amount }, 'balance adjusted by operator');
        return { balance, applied: true };
      } catch (error) {
        if (error instanceof PlatformError && error.code === 'insufficient_balance') {
          throw ValidationError.field('amount', 'The amount may not take the balance below zero.');
        }
        // The same reference twice at once: the other request applied it.
        if (error instanceof UniqueIntegrityConstraintViolationError) return current();
        throw error;
      }
    },
  };
}

export type AdminService = ReturnType<typeof createAdminService>;
