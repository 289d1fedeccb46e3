import type { VoiceService } from '../../runtime/calls/live.js';
import type { CallService } from '../../runtime/calls/service.js';
import { CALL_EVENTS_PER_PAGE, callEventsSchema, listCallsSchema } from '../../schemas/calls.js';
import { checkRealDay } from '../../schemas/dates.js';
import { DEFAULT_PER_PAGE } from '../../schemas/pagination.js';
import { paginate } from '../http/pagination.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { anyObject, dataOf, integer, isoTimestamp, messageWith, nullable, object, oneOf, paginated, string } from '../../schemas/shapes.js';
import { call } from '../../schemas/responses.js';

const tag = 'Calls';

const callEvent = object(
  {
    type: oneOf(['start', 'status', 'turn', 'interruption', 'tool_call', 'latency', 'end'], 'What happened'),
    at: isoTimestamp('When it happened'),
    offset_ms: integer("Milliseconds from the call's creation"),
    data: anyObject(
      'start: {type, mode}; status: {status}; turn: {role, text, start_offset_ms, end_offset_ms}; interruption: {state: paused|resumed|stood}; tool_call: {name, duration_ms, ok, error?} (never arguments); latency: {metric: voice_to_voice|llm_first_token, ms, provider?}; end: {status, duration, reason: hangup|shutdown|orphaned|null}',
    ),
  },
  'One event of a call',
);

export function callRoutes(calls: CallService, voice: VoiceService, publicUrl: () => string): RouteDefinition[] {
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
      summary: 'One call with every field of spec 2.10; a live one with its duration and transcript so far',
      responses: { 200: body(dataOf(call, 'The call')) },
      async handler(req) {
        return json(200, { data: await calls.get(userId(req), idParam(req, 'id', 'call_not_found')) });
      },
    },
    {
      method: 'POST',
      path: '/api/user/calls/:id/hangup',
      auth: 'user',
      tag,
      summary: 'End a live call now, whichever server holds it: status `ended`, saved like any other end (charge, recording, transcript, webhook); the carrier hangs up and a browser call\'s socket closes. 422 once it has ended',
      errors: [422],
      responses: {
        200: body(messageWith(call, 'The call, ended and saved')),
        202: body(messageWith(call, 'The end was asked for but not saved within 5 s (another server holds the call, or the database is away): the call as it stands')),
      },
      async handler(req) {
        const id = idParam(req, 'id', 'call_not_found');
        const { ended } = await voice.hangUp(userId(req), id);
        const data = await calls.get(userId(req), id);
        return ended ? json(200, { message: 'Call ended successfully', data }) : json(202, { message: 'The call is being ended', data });
      },
    },
    {
      method: 'GET',
      path: '/api/user/calls/:id/events',
      auth: 'user',
      tag,
      summary: "A call's events in the order they happened (start, statuses, turns, interruptions, tool calls, latencies, end), paginated; written every heartbeat while it is live",
      querySchema: callEventsSchema.schema,
      responses: { 200: body(paginated(callEvent, "The call's events, oldest first")) },
      async handler(req) {
        const query = callEventsSchema(req.query);
        const page = await calls.events(userId(req), idParam(req, 'id', 'call_not_found'), query.page ?? 1, query.per_page ?? CALL_EVENTS_PER_PAGE);
        return json(200, paginate(page, publicUrl(), req.path, req.rawQuery));
      },
    },
  ];
}
