import { assistantFields } from './assistants.js';
import { CALL_STATUSES } from './calls.js';
import { ENGINE_MODES } from './catalog.js';
import { jsonSchemaOf, type FvRule } from './jsonSchema.js';
import { TOOL_METHODS, TOOL_PARAMETER_TYPES } from './tools.js';
import { DOCUMENT_TYPES } from './knowledge.js';
import {
  anyObject,
  anything,
  array,
  boolean,
  datetime,
  integer,
  isoTimestamp,
  nullable,
  number,
  object,
  oneOf,
  string,
  uri,
  uuid,
  without,
  type Schema,
} from './shapes.js';

/**
 * The records the API answers with (spec section 2 and the operations beyond it), as JSON Schemas
 * with a description on every field. The assistant's settings are read from the rules that
 * validate them (`assistantFields`), so their ranges and defaults are written once.
 */

const created = isoTimestamp('When it was created');
const updated = isoTimestamp('When it last changed');

export const user = object(
  { id: integer('User id'), name: string('Display name'), email: string('Sign-in email'), balance: number('Balance in USD'), created_at: created },
  'The authenticated user',
);
export const registeredUser = without(user, ['created_at'], 'The new user');

export const apiKeyCreated = object({ name: string('Label of the key'), token: string('The secret bearer token; shown only in this response'), created_at: created }, 'The new API key, with its token');
export const apiKey = object(
  { id: integer('Key id (for deletion)'), name: string('Label of the key'), last_used_at: nullable(isoTimestamp('When it last authenticated a request; null if never')), created_at: created },
  'An API key (never its token)',
);

const KNOWLEDGE_STATUSES = ['empty', 'processing', 'active', 'failed'] as const;
export const knowledgebase = object(
  {
    id: integer('Knowledgebase id'),
    name: string('Name, at most 255 characters'),
    description: nullable(string('Description, at most 255 characters')),
    status: oneOf(KNOWLEDGE_STATUSES, 'empty (no documents), processing (a document is being processed), active, failed (every document failed)'),
    status_label: string('The status in words (Empty, Processing, Active, Failed)'),
    documents_count: integer('Documents in it'),
    assistants_count: integer('Assistants that use it'),
    created_at: created,
    updated_at: updated,
  },
  'A knowledgebase',
);

export const document = object(
  {
    id: integer('Document id'),
    name: string('Name, at most 255 characters'),
    description: nullable(string('Description, at most 255 characters')),
    type: oneOf(DOCUMENT_TYPES, 'Where the text comes from: website (scraped), pdf, txt, docx (uploaded)'),
    type_label: string('The type in words (Website, PDF, TXT, DOCX)'),
    status: oneOf(['processing', 'active', 'failed'], 'processing until its text is extracted and indexed, then active (or failed)'),
    status_label: string('The status in words'),
    error: nullable(string('Why processing failed, in words a user can act on; null otherwise')),
    created_at: created,
    updated_at: updated,
  },
  'A document of a knowledgebase',
);

export const passage = object(
  {
    document_id: integer('Document the passage comes from'),
    document_name: string('Name of that document'),
    content: string('The passage text'),
    score: number('Relevance; higher is better (fused full-text and vector ranks)'),
    source: nullable(string('`page N` or the page URL the passage comes from; null for plain files')),
  },
  'A passage that answers the query',
);

export const tool = object(
  {
    id: integer('Tool id (use in tool_ids of an assistant)'),
    name: string('Name the AI calls the tool by: lowercase letters and underscores'),
    description: string('When and how the AI should use the tool'),
    endpoint: uri('URL the platform calls'),
    method: oneOf(TOOL_METHODS, 'HTTP method of the call'),
    timeout: integer('Seconds the platform waits for the endpoint, 1-30'),
    headers: array(object({ name: string('Header name'), value: string('Header value') }, 'An HTTP header'), 'Headers sent with each call'),
    schema: array(
      object({ name: string('Parameter name, 2-32 characters'), type: oneOf(TOOL_PARAMETER_TYPES, 'Parameter type'), description: string('What the AI should put in it') }, 'A parameter'),
      'Parameters the AI extracts from the conversation and sends',
    ),
    created_at: created,
    updated_at: updated,
  },
  'A mid-call tool',
);

const assistantStatus = oneOf(['inactive', 'active'], 'inactive when created; active once it has taken a call');
const assistantType = oneOf(['inbound', 'outbound'], 'inbound answers calls to its number; outbound places calls');
const assistantMode = oneOf(ENGINE_MODES, 'Engine mode');
const assistantUuid = uuid('Public id of the assistant: conversations, web calls and the widget name it by this');

/** The record create and update answer with (spec 4.4), with the `uuid` the public operations need. */
export const assistantSummary = object(
  { id: integer('Assistant id (for the /user/assistant operations)'), uuid: assistantUuid, name: string('Name'), status: assistantStatus, type: assistantType, mode: assistantMode },
  'The assistant',
);

/** Every setting of spec 2.5 as the rules describe it, each present in a read (a nullable one as null). */
function settingsSchemas(): Record<string, Schema> {
  const out: Record<string, Schema> = {};
  for (const [name, rule] of Object.entries(assistantFields(false) as Record<string, FvRule>)) out[name] = jsonSchemaOf(rule);
  return out;
}

export const assistant = object(
  {
    id: integer('Assistant id (for the /user/assistant operations)'),
    uuid: assistantUuid,
    status: assistantStatus,
    ...settingsSchemas(),
    created_at: created,
    updated_at: updated,
  },
  'An assistant with every setting',
);

export const language = object({ id: integer('Language id (language_id, secondary_language_ids)'), name: string('Language name'), iso_2: string('Two-letter ISO 639-1 code') }, 'A language');
export const voice = object(
  {
    id: integer('Voice id (voice_id)'),
    name: string('Voice name'),
    language_id: nullable(integer('Language the voice speaks; null for a multilingual voice')),
    gender: string('Gender of the voice'),
    accent: string('Accent'),
    age: string('Apparent age'),
    preview_url: nullable(uri('A short sample of the voice; null when there is none')),
    synthesizer_provider_id: nullable(integer('Text-to-speech provider of the voice; null when the realtime model speaks')),
    modes: array(oneOf(ENGINE_MODES, 'An engine mode'), 'Engine modes the voice can be used in'),
  },
  'A voice',
);
export const model = object({ id: integer('Model id (llm_model_id, multimodal_model_id, chat_llm_fallback_id)'), name: string('Model name'), code: string("The provider's model code"), provider: string('Provider') }, 'A model');
export const provider = object({ id: integer('Provider id (synthesizer_provider_id, transcriber_provider_id)'), name: string('Provider name'), code: string('Provider code') }, 'A speech provider');

const phoneNumberType = oneOf(['normal', 'sip', 'caller_id'], 'normal (rented here), sip, caller_id (yours elsewhere, for outbound caller ID)');
export const ownedNumber = object(
  {
    id: integer('Number id (phone_number_id)'),
    phone_number: string('The number, E.164'),
    country_code: string('ISO 3166-1 alpha-2 country'),
    type: phoneNumberType,
    type_label: string('The type in words (Dedicated Number, SIP, Caller ID)'),
    sms_capable: boolean('Can send and receive SMS'),
    region: string('Where it is provisioned'),
    has_active_subscription: boolean('Paid up; a lapsed number takes and places no calls'),
    created_at: isoTimestamp('When it was bought or registered'),
  },
  'A number you own',
);
export const purchasableNumber = object(
  {
    phone_number: string('The number, E.164'),
    phone_number_formatted: string('Display form'),
    country_code: string('ISO 3166-1 alpha-2 country'),
    price: number('Monthly rental in USD'),
    billing_price_id: string("The billing provider's price identifier"),
    address_requirements: oneOf(['none', 'local', 'foreign', 'inventory'], 'Address the regulator requires of the renter'),
    sms_capable: boolean('Can send and receive SMS'),
  },
  'A number you can rent',
);
export const assignableNumber = object(
  {
    id: integer('Number id (phone_number_id)'),
    phone_number: string('The number, E.164'),
    country_code: string('ISO 3166-1 alpha-2 country'),
    type_label: oneOf(['Normal', 'SIP', 'Caller ID'], 'The type in words'),
    is_available: boolean('Whether a new inbound assistant can take it'),
  },
  'A number an assistant can use',
);

const functionCall = object(
  { name: string('Function the assistant called'), arguments: anyObject('Arguments it passed'), result: anything('What the function answered') },
  'A function call of the reply',
);
export const functionCalls = array(functionCall, "Functions the assistant called for this reply (shown only with the owner's token)");
export const DELIVERY_STATUSES = ['received', 'pending', 'sent', 'delivered', 'read', 'failed'] as const;
export const historyMessage = object(
  {
    role: oneOf(['assistant', 'user'], 'Who wrote it'),
    content: string('The words'),
    function_calls: functionCalls,
    delivery_status: nullable(
      oneOf(
        DELIVERY_STATUSES,
        "Owner only, on WhatsApp and SMS conversations: received (the customer's message), or for a reply pending (waiting to be sent), sent, delivered, read, failed (its least advanced part); null for a message not sent on the channel",
      ),
    ),
    delivery_error: string("Owner only, on a reply whose delivery failed: the channel's words for why (for instance Meta's re-engagement error outside the 24-hour window)"),
  },
  'A message of a conversation',
  ['function_calls', 'delivery_status', 'delivery_error'],
);
export const conversationType = oneOf(['test', 'widget', 'whatsapp', 'sms', 'api'], 'test (free, owner only), widget (public, charged per user message), whatsapp and sms (a channel\'s customer, charged per message answered), api (owner, charged)');
export const conversationListItem = object(
  {
    id: uuid('Conversation id'),
    assistant_id: uuid('UUID of its assistant (the listing filter takes it, or the integer id)'),
    assistant_name: string('Name of its assistant'),
    type: conversationType,
    message_count: integer('Messages so far'),
    total_cost: number('Charged so far, USD'),
    ai_enabled: boolean('Whether the AI replies (false: a person took over)'),
    created_at: datetime('When it started'),
    updated_at: datetime('When it last changed'),
  },
  'A conversation',
);

export const call = object(
  {
    id: integer('Call id'),
    assistant_name: string('Name of the assistant that held it'),
    campaign_name: nullable(string('Campaign it belongs to; null when none')),
    type: oneOf(['inbound', 'outbound', 'web'], 'inbound, outbound (phone) or web (browser)'),
    duration: integer('Seconds from answer to end'),
    assistant_phone_number: nullable(string("The assistant's number, E.164; null for web calls")),
    client_phone_number: nullable(string("The other party's number, E.164; null for web calls")),
    status: oneOf(CALL_STATUSES, 'Where the call is (spec section 3)'),
    transcript: string('The conversation, one line per turn'),
    variables: anyObject('Variables of the call (given when it was placed and collected during it)'),
    evaluation: nullable(anyObject('Post-call evaluation and the values of post_call_schema; null until evaluated or when evaluation is off')),
    webhook_response: nullable(anyObject("The post-call webhook's answer; null before delivery or without a webhook")),
    carrier_cost: number("The carrier's cost, USD"),
    total_cost: number('Everything charged for the call, USD'),
    answered_by: nullable(oneOf(['human', 'machine', 'unknown'], 'Who picked up, when known')),
    recording_url: nullable(uri('Signed link to the recording (WAV), valid for a limited time; null without one')),
    created_at: datetime('When it started'),
    updated_at: datetime('When it last changed'),
  },
  'A call',
);

export const webhookDelivery = object(
  {
    id: integer('Delivery id (for redelivery)'),
    delivery_id: string('Id sent with every attempt of this delivery'),
    call_id: nullable(integer('Call it is about')),
    event: string('Event name'),
    url: uri('Where it is sent'),
    status: oneOf(['pending', 'delivering', 'delivered', 'failed', 'cancelled'], 'Where the delivery is'),
    attempts: integer('Attempts made'),
    next_attempt_at: isoTimestamp('When the next attempt is due'),
    last_status_code: nullable(integer("HTTP status of the last attempt's answer")),
    last_error: nullable(string('Why the last attempt failed')),
    last_response: nullable(string('Start of the last answer body')),
    created_at: created,
    updated_at: updated,
  },
  'A webhook delivery',
);

