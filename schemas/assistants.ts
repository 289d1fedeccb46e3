import { arrayOf, boolean, integer, number, object, oneOf, record, text, url } from './rules.js';
import { compileSchema } from './validator.js';
import { widgetRule, type WidgetAppearance } from './widget.js';
import { ENGINE_MODES } from './catalog.js';

/** Assistant input (spec 2.5, 2.6). One definition serves create (required fields) and update (all optional). */

export const BUILT_IN_TOOL_TYPES = ['call_transfer', 'end_call', 'dtmf_input', 'calendar_integration'] as const;
export const AMBIENT_SOUNDS = ['off', 'office', 'city', 'forest', 'crowded_room', 'cafe', 'nature'] as const;

export interface BuiltInTool {
  type: (typeof BUILT_IN_TOOL_TYPES)[number];
  description?: string;
  phone_number?: string;
  custom?: boolean;
  timezone?: string;
  calendar_api_key?: string;
  calendar_event_slug?: string;
}

export interface PostCallField {
  name: string;
  type: 'string' | 'number' | 'bool';
  description: string;
}

export interface AssistantInput {
  name: string;
  voice_id: number;
  language_id: number;
  type: 'inbound' | 'outbound';
  mode: (typeof ENGINE_MODES)[number];
  timezone: string;
  initial_message: string;
  system_prompt: string;
  llm_model_id: number | null;
  multimodal_model_id: number | null;
  chat_llm_fallback_id: number | null;
  turn_detection_threshold: number | null;
  secondary_language_ids: number[];
  knowledgebase_id: number | null;
  knowledgebase_mode: 'function_call' | 'prompt';
  phone_number_id: number | null;
  tool_ids: number[];
  tools: BuiltInTool[];
  tts_emotion_enabled: boolean;
  voice_stability: number;
  voice_similarity: number;
  speech_speed: number;
  llm_temperature: number;
  synthesizer_provider_id: number | null;
  transcriber_provider_id: number | null;
  allow_interruptions: boolean;
  fillers: boolean;
  record: boolean;
  enable_noise_cancellation: boolean;
  wait_for_customer: boolean;
  max_duration: number;
  max_silence_duration: number;
  max_initial_silence_duration: number | null;
  ringing_time: number;
  reengagement_interval: number;
  reengagement_prompt: string | null;
  end_call_on_voicemail: boolean;
  voice_mail_message: string | null;
  endpoint_type: 'vad' | 'ai';
  endpoint_sensitivity: number;
  interrupt_sensitivity: number;
  min_interrupt_words: number | null;
  ambient_sound: (typeof AMBIENT_SOUNDS)[number];
  ambient_sound_volume: number;
  is_webhook_active: boolean;
  webhook_url: string | null;
  send_webhook_only_on_completed: boolean;
  include_recording_in_webhook: boolean;
  post_call_evaluation: boolean;
  post_call_schema: PostCallField[];
  variables: Record<string, string | number | boolean>;
  /** Not in spec 2.5: the chat widget's default look (see schemas/widget.ts); null for the platform's. */
  widget: WidgetAppearance | null;
}

const REQUIRED_ON_CREATE = ['name', 'voice_id', 'language_id', 'type', 'mode', 'timezone', 'initial_message', 'system_prompt'] as const;

/**
 * What an assistant holds where a create leaves a setting out (spec 2.5). The one source of these
 * values: the service fills them in, and the OpenAPI document states them on each field.
 */
export const ASSISTANT_DEFAULTS = {
  widget: null,
  chat_llm_fallback_id: null,
  turn_detection_threshold: null,
  secondary_language_ids: [],
  knowledgebase_id: null,
  knowledgebase_mode: 'function_call',
  phone_number_id: null,
  tool_ids: [],
  tools: [],
  tts_emotion_enabled: true,
  voice_stability: 0.7,
  voice_similarity: 0.5,
  speech_speed: 1,
  llm_temperature: 0.1,
  allow_interruptions: true,
  fillers: false,
  record: false,
  enable_noise_cancellation: true,
  wait_for_customer: false,
  max_duration: 600,
  max_silence_duration: 40,
  max_initial_silence_duration: null,
  ringing_time: 30,
  reengagement_interval: 30,
  reengagement_prompt: null,
  end_call_on_voicemail: true,
  voice_mail_message: null,
  endpoint_type: 'vad',
  endpoint_sensitivity: 0.5,
  interrupt_sensitivity: 0.5,
  min_interrupt_words: null,
  ambient_sound: 'off',
  ambient_sound_volume: 0.5,
  is_webhook_active: false,
  webhook_url: null,
  send_webhook_only_on_completed: true,
  include_recording_in_webhook: true,
  post_call_evaluation: true,
  post_call_schema: [],
  variables: {},
} as const satisfies Partial<AssistantInput>;

type Defaulted = keyof typeof ASSISTANT_DEFAULTS;

/** The assistant's fields as rules; `create` makes the fields of REQUIRED_ON_CREATE required. */
export function assistantFields(create: boolean) {
  const required = (name: string) => !(create && (REQUIRED_ON_CREATE as readonly string[]).includes(name));
  /** The documented default of a field (null ones are said in the description instead: they mean "none" or "auto"). */
  const byDefault = (name: Defaulted) => {
    const value: unknown = ASSISTANT_DEFAULTS[name];
    return value === null ? {} : { defaultValue: value };
  };
  const id = (name: string, description: string, nullable = false) => integer({ optional: required(name), nullable, min: 1, description });
  return {
    name: text({ optional: required('name'), max: 255, description: 'Name shown in listings and call records' }),
    voice_id: id('voice_id', 'Voice of the catalog (GET /assistants/voices); must support the engine mode'),
    language_id: id('language_id', 'Main language (GET /assistants/languages)'),
    type: oneOf(['inbound', 'outbound'], { optional: required('type'), description: 'inbound answers calls to its phone number; outbound places calls' }),
    mode: oneOf(ENGINE_MODES, { optional: required('mode'), description: 'Engine: pipeline (speech-to-text, LLM, text-to-speech), multimodal (a realtime speech model), dualplex (realtime model as the brain, a TTS voice)' }),
    timezone: text({ optional: required('timezone'), max: 64, description: 'IANA time zone name (e.g. Europe/Paris), for dates the assistant speaks of' }),
    initial_message: text({ optional: required('initial_message'), max: 200, description: 'First words of the assistant; {{variables}} are substituted' }),
    system_prompt: text({ optional: required('system_prompt'), max: 100_000, description: 'Instructions for the model; {{variables}} are substituted' }),
    llm_model_id: id('llm_model_id', 'LLM of the catalog (GET /assistants/models?type=llm); required in pipeline mode, ignored otherwise', true),
    multimodal_model_id: id('multimodal_model_id', 'Realtime model (GET /assistants/models?type=multimodal); required in multimodal and dualplex modes', true),
    chat_llm_fallback_id: id('chat_llm_fallback_id', 'LLM used for tool calls in multimodal and dualplex; null for none', true),
    turn_detection_threshold: number({ optional: true, nullable: true, min: 0, max: 1, description: 'Realtime turn detection threshold (multimodal and dualplex); null means automatic' }),
    secondary_language_ids: arrayOf(integer({ min: 1, description: 'A language id' }), { optional: true, max: 10, description: 'Further languages the assistant detects and switches to', ...byDefault('secondary_language_ids') }),
    knowledgebase_id: id('knowledgebase_id', 'Your knowledgebase the assistant answers from; null for none', true),
    knowledgebase_mode: oneOf(['function_call', 'prompt'], { optional: true, description: 'function_call: the model searches when it needs to (the only choice in multimodal and dualplex); prompt: passages are put into the prompt (pipeline)', ...byDefault('knowledgebase_mode') }),
    phone_number_id: id('phone_number_id', 'Your number the assistant answers or calls from; an inbound assistant needs one that is not a caller ID nor taken by another inbound assistant', true),
    tool_ids: arrayOf(integer({ min: 1, description: 'A mid-call tool id' }), { optional: true, max: 50, description: 'Your mid-call tools the assistant may call; replaces the list on update', ...byDefault('tool_ids') }),
    tools: arrayOf(
      object({
        type: oneOf(BUILT_IN_TOOL_TYPES, { description: 'call_transfer, end_call, dtmf_input or calendar_integration' }),
        description: text({ optional: true, max: 1000, description: 'When the AI uses the tool' }),
        phone_number: text({ optional: true, max: 32, description: 'call_transfer: E.164 number to transfer to (required)' }),
        custom: boolean({ optional: true, description: 'call_transfer: the AI may choose the number during the call' }),
        timezone: text({ optional: true, max: 64, description: 'call_transfer: time zone of the transfer availability' }),
        calendar_api_key: text({ optional: true, max: 255, description: 'calendar_integration: Cal.com API key (required)' }),
        calendar_event_slug: text({ optional: true, max: 255, description: 'calendar_integration: event type slug (required)' }),
      }, { description: 'A built-in tool' }),
      { optional: true, max: 20, description: 'Built-in tools (spec 2.6); replaces the list on update', ...byDefault('tools') },
    ),
    tts_emotion_enabled: boolean({ optional: true, description: 'Expressive speech where the voice supports it', ...byDefault('tts_emotion_enabled') }),
    voice_stability: number({ optional: true, min: 0, max: 1, description: 'Voice stability: lower is more varied, higher more even', ...byDefault('voice_stability') }),
    voice_similarity: number({ optional: true, min: 0, max: 1, description: 'How closely the voice keeps to the original voice', ...byDefault('voice_similarity') }),
    speech_speed: number({ optional: true, min: 0.7, max: 1.2, description: 'Speaking rate, 1 is normal', ...byDefault('speech_speed') }),
    llm_temperature: number({ optional: true, min: 0, max: 1, description: 'Sampling temperature of the model', ...byDefault('llm_temperature') }),
    synthesizer_provider_id: id('synthesizer_provider_id', 'Text-to-speech provider (GET /assistants/providers); null chooses from the voice and language', true),
    transcriber_provider_id: id('transcriber_provider_id', 'Speech-to-text provider, pipeline only (GET /assistants/providers); null chooses from the language', true),
    allow_interruptions: boolean({ optional: true, description: 'The caller may interrupt the assistant; cannot be false in multimodal or dualplex', ...byDefault('allow_interruptions') }),
    fillers: boolean({ optional: true, description: 'Short fillers while the answer is prepared; pipeline only', ...byDefault('fillers') }),
    record: boolean({ optional: true, description: 'Record calls (a signed recording_url on the call)', ...byDefault('record') }),
    enable_noise_cancellation: boolean({ optional: true, description: "Suppress noise in the caller's audio", ...byDefault('enable_noise_cancellation') }),
    wait_for_customer: boolean({ optional: true, description: 'Wait for the caller to speak first instead of saying initial_message at once', ...byDefault('wait_for_customer') }),
    max_duration: integer({ optional: true, min: 20, max: 1200, description: 'Longest call, in seconds', ...byDefault('max_duration') }),
    max_silence_duration: integer({ optional: true, min: 1, max: 360, description: 'Seconds of silence before the assistant re-engages the caller', ...byDefault('max_silence_duration') }),
    max_initial_silence_duration: integer({ optional: true, nullable: true, min: 1, max: 120, description: 'Seconds of silence at the start after which the call ends; null disables' }),
    ringing_time: integer({ optional: true, min: 1, max: 60, description: 'Seconds an outbound call rings before no-answer', ...byDefault('ringing_time') }),
    reengagement_interval: integer({ optional: true, min: 7, max: 600, description: 'Seconds between re-engagement attempts', ...byDefault('reengagement_interval') }),
    reengagement_prompt: text({ optional: true, nullable: true, max: 1000, description: 'What the assistant is told to say to re-engage; null uses the built-in prompt' }),
    end_call_on_voicemail: boolean({ optional: true, description: 'Hang up when a voicemail answers', ...byDefault('end_call_on_voicemail') }),
    voice_mail_message: text({ optional: true, nullable: true, max: 1000, description: 'Message left on voicemail; null leaves none' }),
    endpoint_type: oneOf(['vad', 'ai'], { optional: true, description: "How the end of the caller's turn is found: vad (silence) or ai (the words too)", ...byDefault('endpoint_type') }),
    endpoint_sensitivity: number({ optional: true, min: 0, max: 5, description: 'How soon a pause ends the caller\'s turn; higher is sooner', ...byDefault('endpoint_sensitivity') }),
    interrupt_sensitivity: number({ optional: true, min: 0, max: 5, description: 'How easily caller speech interrupts the assistant; higher is easier', ...byDefault('interrupt_sensitivity') }),
    min_interrupt_words: integer({ optional: true, nullable: true, min: 0, max: 10, description: 'Words the caller must say to interrupt; null disables the rule' }),
    ambient_sound: oneOf(AMBIENT_SOUNDS, { optional: true, description: 'Background sound mixed under the assistant\'s voice', ...byDefault('ambient_sound') }),
    ambient_sound_volume: number({ optional: true, min: 0, max: 1, description: 'Volume of the ambient sound', ...byDefault('ambient_sound_volume') }),
    is_webhook_active: boolean({ optional: true, description: 'Send post-call webhooks to webhook_url', ...byDefault('is_webhook_active') }),
    webhook_url: url({ optional: true, nullable: true, description: 'Where post-call webhooks go; required when is_webhook_active is true' }),
    send_webhook_only_on_completed: boolean({ optional: true, description: 'Only completed calls are notified, not failed or unanswered ones', ...byDefault('send_webhook_only_on_completed') }),
    include_recording_in_webhook: boolean({ optional: true, description: 'Put the recording URL in the webhook payload', ...byDefault('include_recording_in_webhook') }),
    post_call_evaluation: boolean({ optional: true, description: 'Evaluate each call afterwards and extract post_call_schema', ...byDefault('post_call_evaluation') }),
    post_call_schema: arrayOf(
      object({
        name: text({ min: 3, max: 16, pattern: /^[a-z0-9_]+$/, patternMessage: 'The post call schema name may only contain lowercase letters, numbers and underscores.', description: 'Key in the evaluation: lowercase letters, digits, underscores' }),
        type: oneOf(['string', 'number', 'bool'], { description: 'Type of the extracted value' }),
        description: text({ min: 3, max: 255, description: 'What to extract' }),
      }, { description: 'A value extracted after the call' }),
      { optional: true, max: 50, description: 'Data extracted after each call; replaces the list on update', ...byDefault('post_call_schema') },
    ),
    variables: record({ optional: true, description: 'Values of {{variable_name}} in the prompts; replaces all variables on update', ...byDefault('variables') }),
    widget: widgetRule({ optional: true, nullable: true }),
  };
}

export const createAssistantSchema = compileSchema<Partial<AssistantInput> & Pick<AssistantInput, (typeof REQUIRED_ON_CREATE)[number]>>(assistantFields(true), {
  message: 'Validation failed',
});
export const updateAssistantSchema = compileSchema<Partial<AssistantInput>>(assistantFields(false), { message: 'Validation failed' });

export const disableWebhookSchema = compileSchema<{ assistant_id: number }>(
  { assistant_id: integer({ min: 1, description: 'Your assistant' }) },
  { message: 'The given data was invalid.' },
);
export const enableWebhookSchema = compileSchema<{ assistant_id: number; webhook_url: string }>(
  { assistant_id: integer({ min: 1, description: 'Your assistant' }), webhook_url: url({ description: 'Where post-call webhooks go' }) },
  { message: 'The given data was invalid.' },
);
