import type { AdminService } from '../../runtime/users/admin.js';
import { balanceAdjustmentSchema } from '../../schemas/admin.js';
import { idParam } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { boolean, dataOf, number, object } from '../../schemas/shapes.js';

export function adminRoutes(admin: AdminService): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/admin/users/:id/balance',
      auth: 'admin',
      tag: 'Operators',
      summary: 'Credit (or, with a negative amount, debit) a user balance through the ledger',
      requestSchema: balanceAdjustmentSchema.schema,
      responses: {
        200: body(dataOf(object({ balance: number('The balance after it, USD'), applied: boolean('false when this reference was applied before (nothing changed)') }, 'The adjustment'), 'The balance after the adjustment')),
      },
      async handler(req) {
        const id = idParam(req, 'id', 'user_not_found');
        const { amount, reason, reference } = balanceAdjustmentSchema(req.body);
        return json(200, { data: await admin.adjustBalance(id, amount, reason, reference) });
      },
    },
  ];
}
