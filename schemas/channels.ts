import { integer, oneOf, text } from './rules.js';
import { compileSchema } from './validator.js';
import * as shape from './shapes.js';

/**
 * Messaging channels (WhatsApp Business numbers and SMS numbers answered by an assistant): the
 * request schemas of `/user/channels` and the answer's shape (the data model is migration 0028).
 */

export const CHANNEL_TYPES = ['whatsapp', 'sms'] as const;

export interface ChannelInput {
  type: (typeof CHANNEL_TYPES)[number];
  assistant_id: number;
  phone_number_id: unknown;
  access_token?: string;
  app_secret?: string;
  verify_token?: string;
}

function channelFields(onCreate: boolean) {
  const optional = !onCreate;
  return {
    type: oneOf(CHANNEL_TYPES, { optional, description: 'whatsapp (a WhatsApp Business number, Cloud API) or sms (one of your SMS-capable numbers, through Twilio Messaging); fixed once created' }),
    assistant_id: integer({ optional, min: 1, description: 'The assistant of yours that answers the channel' }),
    phone_number_id: {
      type: 'any',
      optional,
      jsonSchema: { oneOf: [{ type: 'string' }, { type: 'integer' }] },
      description: "whatsapp: the WhatsApp Business phone number id (digits, from Meta's WhatsApp Manager); sms: the id of one of your SMS-capable numbers (GET /user/phone-numbers)",
    },
    access_token: text({ optional: true, max: 4096, notBlank: true, description: 'whatsapp: a system user access token with whatsapp_business_messaging; stored encrypted, never shown' }),
    app_secret: text({ optional: true, max: 256, notBlank: true, description: "whatsapp: your Meta app's secret, which signs its webhooks; stored encrypted, never shown" }),
    verify_token: text({ optional: true, min: 8, max: 256, notBlank: true, description: "whatsapp: the verify token you enter in the Meta app's webhook settings (at least 8 characters, unique to this channel); stored encrypted, never shown" }),
  };
}

export const createChannelSchema = compileSchema<ChannelInput>(channelFields(true));
export const updateChannelSchema = compileSchema<Partial<ChannelInput>>(channelFields(false));

export const channelResponse = shape.object(
  {
    id: shape.integer('Channel id'),
    type: shape.oneOf(CHANNEL_TYPES, 'whatsapp or sms'),
    assistant_id: shape.integer('The assistant that answers it'),
    phone_number_id: { oneOf: [{ type: 'string' }, { type: 'integer' }], description: 'whatsapp: the WhatsApp Business phone number id (string); sms: the id of your number (integer)' },
    phone_number: shape.nullable(shape.string('sms: the number customers write to (E.164); null for whatsapp')),
    webhook_url: shape.string("Where the channel's webhooks must be sent: the callback URL of the Meta app (whatsapp), or the number's A MESSAGE COMES IN webhook at Twilio (sms)"),
    secrets: shape.array(shape.string('A secret that is set'), 'The secrets stored for it (whatsapp: access_token, app_secret, verify_token); their values are never shown'),
    created_at: shape.isoTimestamp('When it was created'),
    updated_at: shape.isoTimestamp('When it last changed'),
  },
  'A messaging channel',
);
