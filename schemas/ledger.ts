import { LEDGER_KINDS, type LedgerKind } from '../runtime/ledger/repository.js';
import { dayRangeQueryFields } from './dates.js';
import { paginationQueryFields } from './pagination.js';
import { oneOf } from './rules.js';
import { compileSchema } from './validator.js';

export const listTransactionsSchema = compileSchema<{ type?: LedgerKind; date_from?: string; date_to?: string; per_page?: number; page?: number }>({
  type: oneOf([...LEDGER_KINDS], { optional: true, description: 'Only entries of this kind' }),
  ...dayRangeQueryFields,
  ...paginationQueryFields,
});
