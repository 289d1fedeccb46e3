import type { Catalog, EngineMode } from '../catalog/service.js';
import type { FieldErrors } from '../errors.js';
import { ASSISTANT_DEFAULTS, type AssistantInput } from '../../schemas/assistants.js';
import type { AssistantSettings } from './repository.js';
import { attributeName as label } from '../../schemas/validator.js';
import { E164 } from '../../schemas/phoneNumbers.js';

/**
 * What an assistant must satisfy as a whole (spec 4.4 rules 1-7 plus catalog references), on
 * create and on update alike, and how settings are filled where the request leaves them out.
 */

/** Settings a create leaves out (spec 2.5); one table with the OpenAPI document's defaults. */
export const settingDefaults = ASSISTANT_DEFAULTS;

/** The TTS provider a voice and language imply; none in multimodal, where the model speaks. */
export function autoSynthesizer(catalog: Catalog, mode: EngineMode, voiceId: number, languageId: number): number | null {
  if (mode === 'multimodal') return null;
  return catalog.voices.get(voiceId)?.synthesizer_provider_id ?? catalog.languages.get(languageId)?.default_synthesizer_provider_id ?? null;
}

/** The STT provider of the language; only the pipeline transcribes separately. */
export function autoTranscriber(catalog: Catalog, mode: EngineMode, languageId: number): number | null {
  if (mode !== 'pipeline') return null;
  return catalog.languages.get(languageId)?.default_transcriber_provider_id ?? null;
}

/**
 * Mode-specific settings for a mode change: models, providers, and the settings a mode forbids,
 * reset to the new mode's defaults unless the same request sets them.
 */
export function resetForMode(catalog: Catalog, settings: AssistantSettings, input: Partial<AssistantInput>): AssistantSettings {
  const mode = settings.mode;
  const given = (key: keyof AssistantInput): boolean => key in input;
  const next = { ...settings };
  if (!given('llm_model_id')) next.llm_model_id = mode === 'pipeline' ? catalog.modelsOfType('llm')[0]?.id ?? null : null;
  if (!given('multimodal_model_id')) next.multimodal_model_id = mode === 'pipeline' ? null : catalog.modelsOfType('multimodal')[0]?.id ?? null;
  if (!given('synthesizer_provider_id')) next.synthesizer_provider_id = null;
  if (!given('transcriber_provider_id')) next.transcriber_provider_id = null;
  if (!given('turn_detection_threshold')) next.turn_detection_threshold = null;
  if (!given('fillers')) next.fillers = false;
  if (mode !== 'pipeline') {
    if (!given('knowledgebase_mode')) next.knowledgebase_mode = 'function_call';
    if (!given('allow_interruptions')) next.allow_interruptions = true;
  }
  return next;
}

/** Null providers mean "choose for me": filled from the voice and language. */
export function fillProviders(catalog: Catalog, settings: AssistantSettings): AssistantSettings {
  return {
    ...settings,
    synthesizer_provider_id: settings.synthesizer_provider_id ?? autoSynthesizer(catalog, settings.mode, settings.voice_id, settings.language_id),
    transcriber_provider_id: settings.transcriber_provider_id ?? autoTranscriber(catalog, settings.mode, settings.language_id),
  };
}

export function isTimezone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** Lookups of the user's own resources, run in the transaction that writes the assistant. */
export interface Ownership {
  toolIds: Set<number>;
  knowledgebase: boolean;
  phoneNumber: { id: number; type: 'normal' | 'sip' | 'caller_id' } | null;
  /** Another inbound assistant already answering the number. */
  phoneNumberTakenBy: number | null;
}

/** Rules that need only the settings and the catalog. */
export function checkSettings(catalog: Catalog, s: AssistantSettings): FieldErrors {
  const errors: FieldErrors = {};
  const add = (field: string, message: string) => (errors[field] ??= []).push(message);
  const multimodalFamily = s.mode !== 'pipeline';

  const voice = catalog.voices.get(s.voice_id);
  if (!voice) add('voice_id', 'The selected voice id is invalid.');
  else if (!voice.modes.includes(s.mode)) add('voice_id', `The selected voice is not compatible with the ${s.mode} engine type.`);
  if (!catalog.languages.has(s.language_id)) add('language_id', 'The selected language id is invalid.');
  s.secondary_language_ids.forEach((id, index) => {
    if (!catalog.languages.has(id)) add(`secondary_language_ids.${index}`, `The selected ${label(`secondary_language_ids.${index}`)} is invalid.`);
  });
  if (new Set(s.secondary_language_ids).size !== s.secondary_language_ids.length) add('secondary_language_ids', 'The secondary language ids field has a duplicate value.');
  if (!isTimezone(s.timezone)) add('timezone', 'The timezone must be a valid zone.');

  // Rule 1: the model of the mode.
  if (s.mode === 'pipeline') {
    if (s.llm_model_id === null) add('llm_model_id', 'The llm model id field is required when mode is pipeline.');
  } else if (s.multimodal_model_id === null) {
    add('multimodal_model_id', `The multimodal model id field is required when mode is ${s.mode}.`);
  }
  if (s.llm_model_id !== null && !catalog.model(s.llm_model_id, 'llm')) add('llm_model_id', 'The selected llm model id is invalid.');
  if (s.multimodal_model_id !== null && !catalog.model(s.multimodal_model_id, 'multimodal')) add('multimodal_model_id', 'The selected multimodal model id is invalid.');
  if (s.chat_llm_fallback_id !== null && !catalog.model(s.chat_llm_fallback_id, 'llm')) add('chat_llm_fallback_id', 'The selected chat llm fallback id is invalid.');
  if (s.synthesizer_provider_id !== null && !catalog.provider(s.synthesizer_provider_id, 'synthesizer')) add('synthesizer_provider_id', 'The selected synthesizer provider id is invalid.');
  if (s.transcriber_provider_id !== null) {
    if (!catalog.provider(s.transcriber_provider_id, 'transcriber')) add('transcriber_provider_id', 'The selected transcriber provider id is invalid.');
    else if (multimodalFamily) add('transcriber_provider_id', 'A transcriber provider can only be set in pipeline mode.');
  }

  // Rules 3 and 4: what multimodal and dualplex forbid.
  if (multimodalFamily && s.knowledgebase_mode !== 'function_call') {
    add('knowledgebase_mode', 'Only function_call knowledgebase mode is available for multimodal and dualplex assistants.');
  }
  if (multimodalFamily && !s.allow_interruptions) add('allow_interruptions', 'Interruptions cannot be disabled in multimodal or dualplex mode.');
  if (multimodalFamily && s.fillers) add('fillers', 'Fillers are only available in pipeline mode.');

  // Rule 6.
  if (s.is_webhook_active && !s.webhook_url) add('webhook_url', 'The webhook url field is required when is webhook active is true.');

  s.tools.forEach((tool, index) => {
    const at = `tools.${index}`;
    const type = `${at}.type`;
    if (tool.type === 'call_transfer') {
      if (!tool.phone_number) add(`${at}.phone_number`, `The ${label(`${at}.phone_number`)} field is required when ${label(type)} is call_transfer.`);
      else if (!E164.test(tool.phone_number)) add(`${at}.phone_number`, `The ${label(`${at}.phone_number`)} must be a phone number in E.164 format.`);
      if (tool.timezone !== undefined && !isTimezone(tool.timezone)) add(`${at}.timezone`, `The ${label(`${at}.timezone`)} must be a valid zone.`);
    }
    if (tool.type === 'calendar_integration') {
      if (!tool.calendar_api_key) add(`${at}.calendar_api_key`, `The ${label(`${at}.calendar_api_key`)} field is required when ${label(type)} is calendar_integration.`);
      if (!tool.calendar_event_slug) add(`${at}.calendar_event_slug`, `The ${label(`${at}.calendar_event_slug`)} field is required when ${label(type)} is calendar_integration.`);
    }
  });
  const names = s.post_call_schema.map((field) => field.name);
  if (new Set(names).size !== names.length) add('post_call_schema', 'The post call schema names must be unique.');
  return errors;
}

/** Rules 5 and 7: resources must be the user's own; an inbound number is a real, free one. */
export function checkOwnership(s: AssistantSettings, owned: Ownership): FieldErrors {
  const errors: FieldErrors = {};
  const add = (field: string, message: string) => (errors[field] ??= []).push(message);
  s.tool_ids.forEach((id, index) => {
    if (!owned.toolIds.has(id)) add(`tool_ids.${index}`, `The selected ${label(`tool_ids.${index}`)} is invalid.`);
  });
  if (new Set(s.tool_ids).size !== s.tool_ids.length) add('tool_ids', 'The tool ids field has a duplicate value.');
  if (s.knowledgebase_id !== null && !owned.knowledgebase) add('knowledgebase_id', 'The selected knowledgebase id is invalid.');
  if (s.phone_number_id !== null) {
    if (!owned.phoneNumber) add('phone_number_id', 'The selected phone number id is invalid.');
    else if (s.type === 'inbound' && owned.phoneNumber.type === 'caller_id') add('phone_number_id', 'A caller ID number cannot be used by an inbound assistant.');
    else if (s.type === 'inbound' && owned.phoneNumberTakenBy !== null) add('phone_number_id', 'The phone number is already assigned to another inbound assistant.');
  }
  return errors;
}
