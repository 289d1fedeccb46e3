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

function fields(create: boolean) {
  const required = (name: string) => !(create && (REQUIRED_ON_CREATE as readonly string[]).includes(name));
  const id = (name: string, nullable = false) => integer({ optional: required(name), nullable, min: 1 });
  return {
    name: text({ optional: required('name'), max: 255 }),
    voice_id: id('voice_id'),
    language_id: id('language_id'),
    type: oneOf(['inbound', 'outbound'], { optional: required('type') }),
    mode: oneOf(ENGINE_MODES, { optional: required('mode') }),
    timezone: text({ optional: required('timezone'), max: 64 }),
    initial_message: text({ optional: required('initial_message'), max: 200 }),
    system_prompt: text({ optional: required('system_prompt'), max: 100_000 }),
    llm_model_id: id('llm_model_id', true),
    multimodal_model_id: id('multimodal_model_id', true),
    chat_llm_fallback_id: id('chat_llm_fallback_id', true),
    turn_detection_threshold: number({ optional: true, nullable: true, min: 0, max: 1 }),
    secondary_language_ids: arrayOf(integer({ min: 1 }), { optional: true, max: 10 }),
    knowledgebase_id: id('knowledgebase_id', true),
    knowledgebase_mode: oneOf(['function_call', 'prompt'], { optional: true }),
    phone_number_id: id('phone_number_id', true),
    tool_ids: arrayOf(integer({ min: 1 }), { optional: true, max: 50 }),
    tools: arrayOf(
      object({
        type: oneOf(BUILT_IN_TOOL_TYPES),
        description: text({ optional: true, max: 1000 }),
        phone_number: text({ optional: true, max: 32 }),
        custom: boolean({ optional: true }),
        timezone: text({ optional: true, max: 64 }),
        calendar_api_key: text({ optional: true, max: 255 }),
        calendar_event_slug: text({ optional: true, max: 255 }),
      }),
      { optional: true, max: 20 },
    ),
    tts_emotion_enabled: boolean({ optional: true }),
    voice_stability: number({ optional: true, min: 0, max: 1 }),
    voice_similarity: number({ optional: true, min: 0, max: 1 }),
    speech_speed: number({ optional: true, min: 0.7, max: 1.2 }),
    llm_temperature: number({ optional: true, min: 0, max: 1 }),
    synthesizer_provider_id: id('synthesizer_provider_id', true),
    transcriber_provider_id: id('transcriber_provider_id', true),
    allow_interruptions: boolean({ optional: true }),
    fillers: boolean({ optional: true }),
    record: boolean({ optional: true }),
    enable_noise_cancellation: boolean({ optional: true }),
    wait_for_customer: boolean({ optional: true }),
    max_duration: integer({ optional: true, min: 20, max: 1200 }),
    max_silence_duration: integer({ optional: true, min: 1, max: 360 }),
    max_initial_silence_duration: integer({ optional: true, nullable: true, min: 1, max: 120 }),
    ringing_time: integer({ optional: true, min: 1, max: 60 }),
    reengagement_interval: integer({ optional: true, min: 7, max: 600 }),
    reengagement_prompt: text({ optional: true, nullable: true, max: 1000 }),
    end_call_on_voicemail: boolean({ optional: true }),
    voice_mail_message: text({ optional: true, nullable: true, max: 1000 }),
    endpoint_type: oneOf(['vad', 'ai'], { optional: true }),
    endpoint_sensitivity: number({ optional: true, min: 0, max: 5 }),
    interrupt_sensitivity: number({ optional: true, min: 0, max: 5 }),
    min_interrupt_words: integer({ optional: true, nullable: true, min: 0, max: 10 }),
    ambient_sound: oneOf(AMBIENT_SOUNDS, { optional: true }),
    ambient_sound_volume: number({ optional: true, min: 0, max: 1 }),
    is_webhook_active: boolean({ optional: true }),
    webhook_url: url({ optional: true, nullable: true }),
    send_webhook_only_on_completed: boolean({ optional: true }),
    include_recording_in_webhook: boolean({ optional: true }),
    post_call_evaluation: boolean({ optional: true }),
    post_call_schema: arrayOf(
      object({
        name: text({ min: 3, max: 16, pattern: /^[a-z0-9_]+$/, patternMessage: 'The post call schema name may only contain lowercase letters, numbers and underscores.' }),
        type: oneOf(['string', 'number', 'bool']),
        description: text({ min: 3, max: 255 }),
      }),
      { optional: true, max: 50 },
    ),
    variables: record({ optional: true }),
    widget: widgetRule({ optional: true, nullable: true }),
  };
}

export const createAssistantSchema = compileSchema<Partial<AssistantInput> & Pick<AssistantInput, (typeof REQUIRED_ON_CREATE)[number]>>(fields(true), {
  message: 'Validation failed',
});
export const updateAssistantSchema = compileSchema<Partial<AssistantInput>>(fields(false), { message: 'Validation failed' });

export const disableWebhookSchema = compileSchema<{ assistant_id: number }>(
  { assistant_id: integer({ min: 1 }) },
  { message: 'The given data was invalid.' },
);
export const enableWebhookSchema = compileSchema<{ assistant_id: number; webhook_url: string }>(
  { assistant_id: integer({ min: 1 }), webhook_url: url() },
  { message: 'The given data was invalid.' },
);
