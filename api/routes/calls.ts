import type { CallService } from '../../runtime/calls/service.js';
import { listCallsSchema } from '../../schemas/calls.js';
import { checkRealDay } from '../../schemas/dates.js';
import { DEFAULT_PER_PAGE } from '../../schemas/pagination.js';
import { paginate } from '../http/pagination.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';

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
      async handler(req) {
        return json(200, { data: await calls.get(userId(req), idParam(req, 'id', 'call_not_found')) });
      },
    },
  ];
}
