import { integer, oneOf } from './rules.js';
import { compileSchema } from './validator.js';

export const deliveriesQuerySchema = compileSchema<{ call_id?: number; status?: 'pending' | 'delivering' | 'delivered' | 'failed' | 'cancelled' }>({
  call_id: integer({ optional: true, min: 1 }),
  status: oneOf(['pending', 'delivering', 'delivered', 'failed', 'cancelled'], { optional: true }),
});
