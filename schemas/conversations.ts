import { boolean, idOrUuid, oneOf, record, text, uuid } from './rules.js';
import { paginationQueryFields } from './pagination.js';
import { compileSchema } from './validator.js';

export const createConversationSchema = compileSchema<{ assistant_id: string; type?: 'widget' | 'test' | 'api'; variables?: Record<string, unknown> }>({
  assistant_id: uuid({ description: 'The assistant UUID' }),
  type: oneOf(['widget', 'test', 'api'], { optional: true, description: 'widget (default, public, charged), test (owner token; free), api (owner token; charged)' }),
  variables: record({ optional: true }),
});

export const sendMessageSchema = compileSchema<{ message: string }>({
  message: text({ max: 2000, notBlank: true }),
});

/** The owner writing in a conversation as a human agent (delivered on its channel, or to the widget). */
export const ownerMessageSchema = compileSchema<{ message: string }>({
  message: text({ max: 4096, notBlank: true, description: 'What you write to the customer, as a human agent; sent on the conversation\'s channel (WhatsApp, SMS) or shown in the widget' }),
});

const DAY = /^\d{4}-\d{2}-\d{2}$/;
export const listConversationsSchema = compileSchema<{ type?: 'test' | 'widget' | 'whatsapp' | 'sms' | 'api'; assistant_id?: string; date_from?: string; date_to?: string; per_page?: number; page?: number }>({
  type: oneOf(['test', 'widget', 'whatsapp', 'sms', 'api'], { optional: true }),
  assistant_id: idOrUuid({ optional: true, description: 'One of your assistants: its integer id, or its UUID (as the listing shows it)' }),
  date_from: text({ optional: true, pattern: DAY, patternMessage: 'The date from does not match the format Y-m-d.' }),
  date_to: text({ optional: true, pattern: DAY, patternMessage: 'The date to does not match the format Y-m-d.' }),
  ...paginationQueryFields,
});

export const aiSwitchSchema = compileSchema<{ ai_enabled: boolean }>({ ai_enabled: boolean() });
