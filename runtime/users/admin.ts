import type { DatabasePool } from 'slonik';
import { PlatformError, ValidationError } from '../errors.js';
import { postLedgerEntry } from '../ledger/service.js';
import type { Logger } from '../logger.js';
import { findUserById } from './repository.js';

/** Operator actions on users, behind ADMIN_TOKEN. */
export function createAdminService({ pool, logger }: { pool: DatabasePool; logger: Logger }) {
  return {
    /**
     * Credits (positive) or debits (negative) a balance through the ledger.
     * @throws PlatformError `user_not_found`; ValidationError on `amount` when a debit would go below zero.
     */
    async adjustBalance(userId: number, amount: number, reason: string): Promise<{ balance: number }> {
      if (!(await findUserById(pool, userId))) throw new PlatformError('user_not_found');
      const balance = await postLedgerEntry(pool, { userId, amount, kind: amount > 0 ? 'admin_credit' : 'admin_debit', reason }).catch(
        (error: unknown) => {
          if (error instanceof PlatformError && error.code === 'insufficient_balance') {
            throw ValidationError.field('amount', 'The amount may not take the balance below zero.');
          }
          throw error;
        },
      );
      logger.info({ userId, amount }, 'balance adjusted by operator');
      return { balance };
    },
  };
}

export type AdminService = ReturnType<typeof createAdminService>;
