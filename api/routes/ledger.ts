import type { LedgerService } from '../../runtime/ledger/service.js';
import { checkRealDay } from '../../schemas/dates.js';
import { listTransactionsSchema } from '../../schemas/ledger.js';
import { DEFAULT_PER_PAGE } from '../../schemas/pagination.js';
import { paginate } from '../http/pagination.js';
import { userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { integer, isoTimestamp, nullable, number, object, oneOf, paginated, string, uuid } from '../../schemas/shapes.js';

const entry = object(
  {
    id: integer('Entry id, in posting order'),
    type: oneOf(['call', 'conversation_message', 'conversation_refund', 'phone_number', 'admin_credit', 'admin_debit'], 'What kind of entry'),
    amount: number('USD; negative for a debit'),
    balance_after: number('The balance after this entry, USD'),
    description: nullable(string('What it was for, in words')),
    call_id: nullable(integer('The call charged, for call entries')),
    conversation_id: nullable(uuid('The conversation, for message charges and refunds')),
    phone_number_id: nullable(integer('The phone number rented')),
    phone_number: nullable(string('That number, E.164')),
    admin_reference: nullable(string("The operator's reference, for credits and debits by an operator")),
    created_at: isoTimestamp('When it was posted'),
  },
  'One ledger entry',
);

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
      responses: { 200: body(paginated(entry, 'Your ledger entries, last posted first')) },
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
