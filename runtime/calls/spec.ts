import type { DatabasePool } from 'slonik';
import type { AssistantRow } from '../assistants/repository.js';
import type { CatalogService } from '../catalog/service.js';
import type { Clock } from '../clock.js';
import { toolFunction } from '../agent/httpTools.js';
import { SEARCH_FUNCTION } from '../agent/knowledge.js';
import { renderTemplate } from '../agent/prompts.js';
import type { KnowledgeService } from '../knowledge/service.js';
import type { LlmRegistry } from '../llm/registry.js';
import type { OutboundFetch } from '../net/outbound.js';
import { listAssistantTools } from '../tools/repository.js';
import { builtinFunctions } from '../voice/speaking/builtins.js';
import type { SpeechRegistry } from '../voice/providers/registry.js';
import type { VadSource } from '../voice/hearing/vad/vad.js';
import type { CallSpec } from '../voice/spec.js';

/** What a call's spec is read from. */
export interface CallSpecDeps {
  readonly pool: DatabasePool;
  readonly catalog: CatalogService;
  readonly llm: LlmRegistry;
  readonly speech: SpeechRegistry;
  readonly knowledge: KnowledgeService;
  readonly outbound: OutboundFetch;
  readonly clock: Clock;
  readonly calendarBaseUrl: string;
  /** The process's voice activity detector (`VOICE_VAD`). @defaultValue the energy VAD */
  readonly vad?: VadSource;
}

/** The date and time at the call's start in the assistant's time zone, so "tomorrow at ten" means something to the model. */
export function localTime(now: number, timezone: string): string {
  let formatted: string;
  try {
    formatted = new Intl.DateTimeFormat('en-GB', { timeZone: timezone, weekday: 'long', year: 'numeric', month: 'long', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(now);
  } catch {
    return '';
  }
  return `It is now ${formatted} (${timezone}).`;
}
const VOICE_STYLE = 'You are speaking on a live phone call. Answer in short, natural spoken sentences, without lists, markdown or emojis.';

/** The call's language for the model (whatever the language of the prompt), and the others it may switch to. */
function languageLine(languages: readonly { name: string }[]): string {
  const [primary, ...others] = languages.map((l) => l.name);
  if (others.length === 0) return `Speak ${primary}.`;
  return `Speak ${primary}; when the caller speaks ${others.join(' or ')}, answer in their language.`;
}

/**
 * Everything a call is told and given, from its assistant as it is now: the prompt (with the
 * call's languages, its voice style and the local time), the greeting and timers, turn-taking
 * settings, the models and speech providers, and the functions it may call.
 */
export async function callSpec(deps: CallSpecDeps, assistant: AssistantRow, call: { callId: number; type: CallSpec['type']; variables: Record<string, unknown> }): Promise<CallSpec> {
  const { callId, type, variables } = call;
  const catalog = await deps.catalog.get();
  const language = catalog.languages.get(assistant.language_id)!;
  const voice = catalog.voices.get(assistant.voice_id)!;
  const mode = assistant.mode;
  const ttsProvider = voice.synthesizer_provider_id ?? assistant.synthesizer_provider_id ?? language.default_synthesizer_provider_id;
  const languages = [language, ...assistant.secondary_language_ids.map((id) => catalog.languages.get(id)).filter((l) => l !== undefined)].map((l) => {
    const own = l.id === language.id ? voice : catalog.voicesFor({ mode, languageId: l.id }).find((v) => v.synthesizer_provider_id === ttsProvider && v.language_id === l.id) ?? voice;
    return { code: l.iso_2, name: l.name, voice: own.provider_voice_id };
  });
  const model = async (id: number | null) => {
    const row = id === null ? undefined : catalog.models.get(id);
    return row ? { provider: deps.llm.provider(row.provider), model: row.code } : undefined;
  };
  const textModel = (await model(mode === 'pipeline' ? assistant.llm_model_id : assistant.chat_llm_fallback_id)) ?? { provider: deps.llm.provider('dev'), model: 'dev' };
  const tools = await listAssistantTools(deps.pool, assistant.id);
  const kbId = assistant.knowledgebase_id ?? undefined;
  const builtins = builtinFunctions({ tools: assistant.tools, timezone: assistant.timezone, outbound: deps.outbound, calendarBaseUrl: deps.calendarBaseUrl, subject: { userId: assistant.user_id, assistantId: assistant.id, callId } });
  const functions = [...tools.map(toolFunction), ...(kbId !== undefined && assistant.knowledgebase_mode === 'function_call' ? [SEARCH_FUNCTION] : []), ...builtins.map((b) => b.definition)];
  const merged = { ...assistant.variables, ...variables };
  const multimodalModel = assistant.multimodal_model_id === null ? undefined : catalog.models.get(assistant.multimodal_model_id);
  const sttCode = catalog.transcriberCode(assistant);
  const ttsCode = catalog.providers.get(ttsProvider)?.code ?? 'dev';
  return {
    callId,
    ownerId: assistant.user_id,
    type,
    mode,
    systemPrompt: `${renderTemplate(assistant.system_prompt, merged)}\n\n${VOICE_STYLE} ${languageLine(languages)}\n${localTime(deps.clock.now(), assistant.timezone)}`,
    greeting: assistant.initial_message ? renderTemplate(assistant.initial_message, merged) : null,
    waitForCustomer: assistant.wait_for_customer,
    timers: {
      ringingMs: assistant.ringing_time * 1000,
      maxDurationMs: assistant.max_duration * 1000,
      maxSilenceMs: assistant.max_silence_duration * 1000,
      initialSilenceMs: assistant.max_initial_silence_duration === null ? null : assistant.max_initial_silence_duration * 1000,
      reengageMs: assistant.reengagement_interval * 1000,
    },
    reengagementPrompt: assistant.reengagement_prompt === null ? null : renderTemplate(assistant.reengagement_prompt, merged),
    voiceMailMessage: assistant.voice_mail_message === null ? null : renderTemplate(assistant.voice_mail_message, merged),
    endCallOnVoicemail: assistant.end_call_on_voicemail,
    allowInterruptions: assistant.allow_interruptions,
    interruptSensitivity: assistant.interrupt_sensitivity,
    minInterruptWords: assistant.min_interrupt_words,
    endpointType: assistant.endpoint_type,
    endpointSensitivity: assistant.endpoint_sensitivity,
    fillers: assistant.fillers && mode === 'pipeline',
    temperature: assistant.llm_temperature,
    noiseCancellation: assistant.enable_noise_cancellation,
    vad: deps.vad,
    ambient: assistant.ambient_sound === 'off' ? null : { sound: assistant.ambient_sound, volume: assistant.ambient_sound_volume },
    languages,
    voiceSettings: { speed: assistant.speech_speed, stability: assistant.voice_stability, similarity: assistant.voice_similarity, emotion: assistant.tts_emotion_enabled },
    llm: textModel,
    fallback: mode === 'pipeline' ? await model(assistant.chat_llm_fallback_id) : undefined,
    toolFallback: mode === 'pipeline' ? undefined : await model(assistant.chat_llm_fallback_id),
    stt: mode === 'pipeline' ? deps.speech.stt(sttCode) : undefined,
    tts: mode === 'multimodal' ? undefined : deps.speech.tts(ttsCode),
    realtime:
      mode === 'pipeline'
        ? undefined
        : { provider: deps.speech.realtime(multimodalModel?.provider ?? 'dev'), model: multimodalModel?.code ?? 'dev-realtime', voice: voice.provider_voice_id, threshold: assistant.turn_detection_threshold },
    functions,
    functionContext: { ownerId: assistant.user_id, tools: new Map(tools.map((t) => [t.name, t])), knowledgebaseId: kbId, knowledge: deps.knowledge, outbound: deps.outbound, fallbackQuery: '' },
    promptKnowledgebaseId: kbId !== undefined && assistant.knowledgebase_mode === 'prompt' && mode === 'pipeline' ? kbId : undefined,
    builtins,
    answeredBy: null,
  };
}
