import type { LedgerService } from '../../runtime/ledger/service.js';
import { checkRealDay } from '../../schemas/dates.js';
import { listTransactionsSchema } from '../../schemas/ledger.js';
import { DEFAULT_PER_PAGE } from '../../schemas/pagination.js';
import { paginate } from '../http/pagination.js';
import { userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';

const tag = 'Billing';

export function ledgerRoutes(ledger: LedgerService, publicUrl: () => string): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/api/user/transactions',
      auth: 'user',
      tag,
      summary:
        'Your ledger entries (charges, refunds, number rentals, credits), newest first, paginated: each with its amount (negative for a debit), the balance after it, and the call, conversation, phone number or operator reference it is for',
      querySchema: listTransactionsSchema.schema,
      async handler(req) {
        const query = listTransactionsSchema(req.query);
        checkRealDay('date_from', query.date_from);
        checkRealDay('date_to', query.date_to);
        const page = await ledger.list(userId(req), { type: query.type, dateFrom: query.date_from, dateTo: query.date_to }, query.page ?? 1, query.per_page ?? DEFAULT_PER_PAGE);
        return json(200, paginate(page, publicUrl(), req.path, req.rawQuery));
      },
    },
  ];
}
