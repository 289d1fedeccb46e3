import type { ConversationService } from '../../runtime/conversations/service.js';
import { PlatformError, ValidationError } from '../../runtime/errors.js';
import type { RateLimiter } from '../../runtime/rateLimit.js';
import { checkRealDay } from '../../schemas/dates.js';
import { DEFAULT_PER_PAGE } from '../../schemas/pagination.js';
import { aiSwitchSchema, createConversationSchema, listConversationsSchema, ownerMessageSchema, sendMessageSchema } from '../../schemas/conversations.js';
import { paginate } from '../http/pagination.js';
import { userId } from '../http/params.js';
import { json, type ApiRequest, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { array, boolean, constant, integer, nullable, object, oneOf, paginated, string, uuid } from '../../schemas/shapes.js';
import { conversationListItem, functionCalls, historyMessage } from '../../schemas/responses.js';

const statusTrue = constant(true, 'Always true');
const history = array(historyMessage, 'Messages in order');

const tag = 'Conversations';

export interface ConversationLimits {
  /** Per client IP, all public conversation operations. */
  readonly perIp: RateLimiter;
  /** Per conversation, messages. */
  readonly perConversation: RateLimiter;
}

function limit(limiter: RateLimiter, key: string): void {
  const verdict = limiter.take(key);
  if (!verdict.ok) throw new PlatformError('too_many_requests', { headers: { 'Retry-After': String(verdict.retryAfterSeconds) } });
}

export function conversationRoutes(conversations: ConversationService, limits: ConversationLimits, publicUrl: () => string): RouteDefinition[] {
  const clientKey = (req: ApiRequest) => `ip:${req.ip}`;
  return [
    {
      method: 'POST',
      path: '/api/conversations',
      auth: 'optional',
      family: 'conversation',
      tag,
      summary: "Start a conversation with an assistant (by its UUID): widget is public and charged, test and api need the owner's token; rate limited",
      requestSchema: createConversationSchema.schema,
      errors: [402, 404, 429],
      responses: {
        200: body(object({ status: statusTrue, conversation_id: uuid('The new conversation'), history: { ...history, description: "The assistant's rendered initial message when it has one, else empty" } }, 'The new conversation')),
      },
      async handler(req) {
        limit(limits.perIp, clientKey(req));
        const input = createConversationSchema(req.body);
        const created = await conversations.create({ assistantUuid: input.assistant_id, type: input.type ?? 'widget', variables: input.variables ?? {}, callerId: req.principal?.userId });
        return json(200, { status: true, ...created });
      },
    },
    {
      method: 'POST',
      path: '/api/conversations/:id/messages',
      auth: 'optional',
      family: 'conversation',
      tag,
      summary: "Send a message and receive the reply, in order; function calls and why a reply failed only with the owner's token",
      requestSchema: sendMessageSchema.schema,
      errors: [402, 429, 502],
      responses: {
        200: body(object({ status: statusTrue, message: nullable(string("The assistant's reply; null when AI replies are off")), function_calls: functionCalls }, 'The reply')),
      },
      async handler(req) {
        limit(limits.perIp, clientKey(req));
        const id = req.params.id!;
        limit(limits.perConversation, `conversation:${id}`);
        const { message } = sendMessageSchema(req.body);
        const reply = await conversations.send(id, message, req.principal?.userId);
        return json(200, { status: true, message: reply.message, function_calls: reply.function_calls });
      },
    },
    {
      method: 'GET',
      path: '/api/conversations/:id',
      auth: 'optional',
      family: 'conversation',
      tag,
      summary: "The history of a conversation, in order; function calls only with the owner's token",
      errors: [429],
      responses: { 200: body(object({ status: statusTrue, history }, 'The history')) },
      async handler(req) {
        limit(limits.perIp, clientKey(req));
        return json(200, { status: true, history: await conversations.history(req.params.id!, req.principal?.userId) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/conversations',
      auth: 'user',
      tag,
      summary: 'Conversations of your assistants, newest first, paginated',
      querySchema: listConversationsSchema.schema,
      responses: { 200: body(paginated(conversationListItem, 'A page of conversations')) },
      async handler(req) {
        const owner = userId(req);
        const query = listConversationsSchema(req.query);
        checkRealDay('date_from', query.date_from);
        checkRealDay('date_to', query.date_to);
        const assistantId = query.assistant_id === undefined ? undefined : await conversations.ownedAssistantId(owner, query.assistant_id);
        if (assistantId === null) throw ValidationError.field('assistant_id', 'The selected assistant id is invalid.');
        const page = await conversations.list(
          owner,
          { type: query.type, assistantId, dateFrom: query.date_from, dateTo: query.date_to },
          query.page ?? 1,
          query.per_page ?? DEFAULT_PER_PAGE,
        );
        return json(200, paginate(page, publicUrl(), req.path, req.rawQuery));
      },
    },
    {
      method: 'POST',
      path: '/api/user/conversations/:id/messages',
      auth: 'user',
      family: 'conversation',
      tag,
      summary: "Write to the customer as a human agent (for instance with AI replies off): sent on the conversation's channel (WhatsApp, SMS) or shown in the widget; not charged",
      requestSchema: ownerMessageSchema.schema,
      responses: {
        201: body(
          object(
            {
              status: statusTrue,
              message: string('What happened, in words for people'),
              data: object(
                {
                  id: integer('The message'),
                  role: constant('assistant', 'Written on the assistant\'s side'),
                  content: string('The words'),
                  delivery_status: nullable(oneOf(['pending'], 'pending on a channel (GET the history for its progress); null elsewhere')),
                },
                'The message',
              ),
            },
            'Sent',
          ),
        ),
      },
      async handler(req) {
        const { message } = ownerMessageSchema(req.body);
        const data = await conversations.ownerMessage(userId(req), req.params.id!, message);
        return json(201, { status: true, message: 'Message sent.', data });
      },
    },
    {
      method: 'PATCH',
      path: '/api/user/conversations/:id',
      auth: 'user',
      family: 'conversation',
      tag,
      summary: 'Turn AI replies off (take the conversation over) or back on',
      requestSchema: aiSwitchSchema.schema,
      responses: {
        200: body(object({ status: statusTrue, message: string('What happened, in words for people'), data: object({ id: uuid('The conversation'), ai_enabled: boolean('Whether the AI replies now') }, 'The conversation') }, 'Switched')),
      },
      async handler(req) {
        const { ai_enabled } = aiSwitchSchema(req.body);
        const row = await conversations.setAiEnabled(userId(req), req.params.id!, ai_enabled);
        return json(200, { status: true, message: ai_enabled ? 'AI replies enabled.' : 'AI replies disabled.', data: { id: row.id, ai_enabled: row.ai_enabled } });
      },
    },
  ];
}
