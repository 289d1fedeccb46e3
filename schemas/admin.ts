import { compileSchema } from './validator.js';
import { number, text } from './rules.js';

export interface BalanceAdjustmentInput {
  amount: number;
  reason: string;
  reference?: string;
}
export const balanceAdjustmentSchema = compileSchema<BalanceAdjustmentInput>({
  amount: {
    ...number({ min: -1_000_000, max: 1_000_000, decimals: 6, description: 'USD with up to six decimals; negative debits' }),
    notEqual: 0,
  },
  reason: text({ max: 255 }),
  reference: text({ optional: true, max: 100, description: 'Idempotency key: an adjustment sent again with the same reference is applied once' }),
});
