import type { CallService } from '../../runtime/calls/service.js';
import { listCallsSchema } from '../../schemas/calls.js';
import { checkRealDay } from '../../schemas/dates.js';
import { DEFAULT_PER_PAGE } from '../../schemas/pagination.js';
import { paginate } from '../http/pagination.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { dataOf, nullable, paginated, string } from '../../schemas/shapes.js';
import { call } from '../../schemas/responses.js';

const tag = 'Calls';

export function callRoutes(calls: CallService, publicUrl: () => string): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/api/user/calls',
      auth: 'user',
      tag,
      summary: 'Your calls, newest first, with the filters of spec 4.7, paginated; `search` finds words in transcripts (with `next_search_after` for deep pages)',
      querySchema: listCallsSchema.schema,
      responses: { 200: body(paginated(call, 'A page of calls', { next_search_after: nullable(string('With search: the cursor for the page after this one (pass as search_after); null on the last page')) })) },
      async handler(req) {
        const query = listCallsSchema(req.query);
        checkRealDay('date_from', query.date_from);
        checkRealDay('date_to', query.date_to);
        const page = await calls.list(
          userId(req),
          { status: query.status, type: query.type, phoneNumber: query.phone_number, assistantId: query.assistant_id, campaignId: query.campaign_id, dateFrom: query.date_from, dateTo: query.date_to },
          query.page ?? 1,
          query.per_page ?? DEFAULT_PER_PAGE,
          query.search?.trim() ? { text: query.search.trim(), after: query.search_after } : undefined,
        );
        const envelope = paginate(page, publicUrl(), req.path, req.rawQuery);
        return json(200, page.nextSearchAfter === undefined ? envelope : { ...envelope, next_search_after: page.nextSearchAfter });
      },
    },
    {
      method: 'GET',
      path: '/api/user/calls/:id',
      auth: 'user',
      tag,
      summary: 'One call with every field of spec 2.10',
      responses: { 200: body(dataOf(call, 'The call')) },
      async handler(req) {
        return json(200, { data: await calls.get(userId(req), idParam(req, 'id', 'call_not_found')) });
      },
    },
  ];
}
