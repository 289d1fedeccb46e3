import { sql, type CommonQueryMethods, type ValueExpression } from 'slonik';
import { z } from 'zod';
import type { AssistantInput } from '../../schemas/assistants.js';
import { isUuid } from '../../schemas/rules.js';

/** Columns of `assistants` that hold settings of spec 2.5 (everything but ids, status and timestamps). */
export const SETTING_COLUMNS = [
  'name', 'voice_id', 'language_id', 'type', 'mode', 'timezone', 'initial_message', 'system_prompt',
  'llm_model_id', 'multimodal_model_id', 'chat_llm_fallback_id', 'turn_detection_threshold', 'secondary_language_ids',
  'knowledgebase_id', 'knowledgebase_mode', 'phone_number_id', 'tools', 'tts_emotion_enabled', 'voice_stability',
  'voice_similarity', 'speech_speed', 'llm_temperature', 'synthesizer_provider_id', 'transcriber_provider_id',
  'allow_interruptions', 'fillers', 'record', 'enable_noise_cancellation', 'wait_for_customer', 'max_duration',
  'max_silence_duration', 'max_initial_silence_duration', 'ringing_time', 'reengagement_interval', 'reengagement_prompt',
  'end_call_on_voicemail', 'voice_mail_message', 'endpoint_type', 'endpoint_sensitivity', 'interrupt_sensitivity',
  'min_interrupt_words', 'ambient_sound', 'ambient_sound_volume', 'is_webhook_active', 'webhook_url',
  'send_webhook_only_on_completed', 'include_recording_in_webhook', 'post_call_evaluation', 'post_call_schema', 'variables',
  'widget',
] as const satisfies ReadonlyArray<Exclude<keyof AssistantInput, 'tool_ids'>>;

export type AssistantSettings = Omit<AssistantInput, 'tool_ids'> & { tool_ids: number[] };

const JSON_COLUMNS = new Set<string>(['tools', 'post_call_schema', 'variables', 'widget']);

const nullableNumber = z.number().nullable();
export const assistantRow = z.object({
  id: z.number(),
  uuid: z.string(),
  user_id: z.number(),
  status: z.enum(['inactive', 'active']),
  name: z.string(),
  voice_id: z.number(),
  language_id: z.number(),
  type: z.enum(['inbound', 'outbound']),
  mode: z.enum(['pipeline', 'multimodal', 'dualplex']),
  timezone: z.string(),
  initial_message: z.string(),
  system_prompt: z.string(),
  llm_model_id: nullableNumber,
  multimodal_model_id: nullableNumber,
  chat_llm_fallback_id: nullableNumber,
  turn_detection_threshold: nullableNumber,
  secondary_language_ids: z.array(z.number()),
  knowledgebase_id: nullableNumber,
  knowledgebase_mode: z.enum(['function_call', 'prompt']),
  phone_number_id: nullableNumber,
  tool_ids: z.array(z.number()),
  tools: z.array(z.record(z.unknown())),
  tts_emotion_enabled: z.boolean(),
  voice_stability: z.number(),
  voice_similarity: z.number(),
  speech_speed: z.number(),
  llm_temperature: z.number(),
  synthesizer_provider_id: nullableNumber,
  transcriber_provider_id: nullableNumber,
  allow_interruptions: z.boolean(),
  fillers: z.boolean(),
  record: z.boolean(),
  enable_noise_cancellation: z.boolean(),
  wait_for_customer: z.boolean(),
  max_duration: z.number(),
  max_silence_duration: z.number(),
  max_initial_silence_duration: nullableNumber,
  ringing_time: z.number(),
  reengagement_interval: z.number(),
  reengagement_prompt: z.string().nullable(),
  end_call_on_voicemail: z.boolean(),
  voice_mail_message: z.string().nullable(),
  endpoint_type: z.enum(['vad', 'ai']),
  endpoint_sensitivity: z.number(),
  interrupt_sensitivity: z.number(),
  min_interrupt_words: nullableNumber,
  ambient_sound: z.enum(['off', 'office', 'city', 'forest', 'crowded_room', 'cafe', 'nature']),
  ambient_sound_volume: z.number(),
  is_webhook_active: z.boolean(),
  webhook_url: z.string().nullable(),
  send_webhook_only_on_completed: z.boolean(),
  include_recording_in_webhook: z.boolean(),
  post_call_evaluation: z.boolean(),
  post_call_schema: z.array(z.object({ name: z.string(), type: z.enum(['string', 'number', 'bool']), description: z.string() })),
  variables: z.record(z.union([z.string(), z.number(), z.boolean()])),
  widget: z
    .object({
      title: z.string().optional(),
      color: z.string().optional(),
      text_color: z.string().optional(),
      avatar_url: z.string().optional(),
      position: z.enum(['bottom-right', 'bottom-left']).optional(),
      greeting: z.enum(['message', 'teaser']).optional(),
    })
    .nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type AssistantRow = z.infer<typeof assistantRow>;

/** An assistant as the API shows it: every column but its owner's id (left out by the parse itself). */
export const assistantViewRow = assistantRow.omit({ user_id: true });
export type AssistantViewRow = z.infer<typeof assistantViewRow>;

/**
 * An assistant is read as one jsonb value, not as its 66 columns: node-postgres describes and
 * converts every column of every result anew, and for this wide row that was most of the server's
 * work on a read. Timestamps are written here in the `<iso_timestamp>` form that the pool gives
 * timestamp columns.
 */
const isoTimestamp = (column: string) => sql.fragment`to_char(${sql.identifier(['a', column])} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const assistantJson = sql.fragment`to_jsonb(a) || jsonb_build_object(
  'tool_ids', coalesce((SELECT jsonb_agg(t.tool_id ORDER BY t.tool_id) FROM assistant_tools t WHERE t.assistant_id = a.id), '[]'),
  'created_at', ${isoTimestamp('created_at')},
  'updated_at', ${isoTimestamp('updated_at')})`;
const selectAssistant = sql.fragment`SELECT ${assistantJson} AS assistant FROM assistants a`;
const assistantColumn = z.object({ assistant: assistantRow });
const assistantViewColumn = z.object({ assistant: assistantViewRow });

function value(column: string, settings: AssistantSettings): ValueExpression {
  const raw = settings[column as keyof AssistantSettings];
  if (JSON_COLUMNS.has(column)) return raw === null ? null : sql.jsonb(raw as never);
  if (column === 'secondary_language_ids') return sql.array(raw as number[], 'int4');
  return raw as ValueExpression;
}

export async function insertAssistant(db: CommonQueryMethods, userId: number, settings: AssistantSettings): Promise<number> {
  return db.oneFirst(sql.type(z.object({ id: z.number() }))`
    INSERT INTO assistants (user_id, ${sql.join(SETTING_COLUMNS.map((c) => sql.identifier([c])), sql.fragment`, `)})
    VALUES (${userId}, ${sql.join(SETTING_COLUMNS.map((c) => value(c, settings)), sql.fragment`, `)})
    RETURNING id`);
}

/** Writes every setting; the caller merged the stored values with the request. */
export async function updateAssistant(db: CommonQueryMethods, userId: number, id: number, settings: AssistantSettings): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE assistants SET
      ${sql.join(SETTING_COLUMNS.map((c) => sql.fragment`${sql.identifier([c])} = ${value(c, settings)}`), sql.fragment`, `)},
      updated_at = now()
    WHERE id = ${id} AND user_id = ${userId}`);
}

export async function replaceAssistantTools(db: CommonQueryMethods, assistantId: number, toolIds: readonly number[]): Promise<void> {
  await db.query(sql.unsafe`DELETE FROM assistant_tools WHERE assistant_id = ${assistantId}`);
  if (toolIds.length === 0) return;
  await db.query(sql.unsafe`
    INSERT INTO assistant_tools (assistant_id, tool_id)
    SELECT ${assistantId}, tool_id FROM unnest(${sql.array([...toolIds], 'int8')}) AS tool_id`);
}

export async function findAssistant(db: CommonQueryMethods, userId: number, id: number): Promise<AssistantRow | null> {
  return db.maybeOneFirst(sql.type(assistantColumn)`${selectAssistant} WHERE a.id = ${id} AND a.user_id = ${userId}`);
}

/** An assistant with when its tools last changed (a live conversation rebuilds when either moved). */
export type AssistantWithTools = AssistantRow & { readonly tools_version: string };

const assistantWithToolsColumn = z.object({ assistant: assistantRow.extend({ tools_version: z.string() }) });

export async function findAssistantWithTools(db: CommonQueryMethods, userId: number, id: number): Promise<AssistantWithTools | null> {
  return db.maybeOneFirst(sql.type(assistantWithToolsColumn)`
    SELECT ${assistantJson} || jsonb_build_object('tools_version',
      coalesce((SELECT max(t.updated_at)::text FROM tools t JOIN assistant_tools at ON at.tool_id = t.id WHERE at.assistant_id = a.id), '')) AS assistant
    FROM assistants a WHERE a.id = ${id} AND a.user_id = ${userId}`);
}

/** Locks the row for a read-modify-write update. */
export async function findAssistantForUpdate(db: CommonQueryMethods, userId: number, id: number): Promise<AssistantRow | null> {
  return db.maybeOneFirst(sql.type(assistantColumn)`${selectAssistant} WHERE a.id = ${id} AND a.user_id = ${userId} FOR UPDATE OF a`);
}

export async function findAssistantView(db: CommonQueryMethods, userId: number, id: number): Promise<AssistantViewRow | null> {
  return db.maybeOneFirst(sql.type(assistantViewColumn)`${selectAssistant} WHERE a.id = ${id} AND a.user_id = ${userId}`);
}

export async function listAssistantViews(db: CommonQueryMethods, userId: number): Promise<readonly AssistantViewRow[]> {
  return db.anyFirst(sql.type(assistantViewColumn)`${selectAssistant} WHERE a.user_id = ${userId} ORDER BY a.id`);
}

export async function deleteAssistant(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  const result = await db.query(sql.unsafe`DELETE FROM assistants WHERE id = ${id} AND user_id = ${userId}`);
  return result.rowCount > 0;
}

export async function setWebhook(db: CommonQueryMethods, userId: number, id: number, url: string | null): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    UPDATE assistants SET is_webhook_active = ${url !== null}, webhook_url = ${url}, updated_at = now()
    WHERE id = ${id} AND user_id = ${userId}`);
  return result.rowCount > 0;
}

/** Which of `ids` are tools of this user. */
export async function ownedToolIds(db: CommonQueryMethods, userId: number, ids: readonly number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const found = await db.anyFirst(sql.type(z.object({ id: z.number() }))`
    SELECT id FROM tools WHERE user_id = ${userId} AND id = ANY(${sql.array([...ids], 'int8')})`);
  return new Set(found);
}

export async function knowledgebaseOwned(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM knowledgebases WHERE id = ${id} AND user_id = ${userId}`);
}

export async function findOwnedPhoneNumber(db: CommonQueryMethods, userId: number, id: number): Promise<{ id: number; type: 'normal' | 'sip' | 'caller_id' } | null> {
  return db.maybeOne(sql.type(z.object({ id: z.number(), type: z.enum(['normal', 'sip', 'caller_id']) }))`
    SELECT id, type FROM phone_numbers WHERE id = ${id} AND user_id = ${userId}`);
}

/** The inbound assistant other than `exceptId` that answers this number, if any. */
export async function inboundAssistantOfNumber(db: CommonQueryMethods, phoneNumberId: number, exceptId: number | null): Promise<number | null> {
  return db.maybeOneFirst(sql.type(z.object({ id: z.number() }))`
    SELECT id FROM assistants
    WHERE phone_number_id = ${phoneNumberId} AND type = 'inbound' AND id <> ${exceptId ?? 0}`);
}

/** An assistant by its public UUID, whoever owns it (conversations are public); none for text that is no UUID. */
export async function findAssistantByUuid(db: CommonQueryMethods, uuid: string): Promise<AssistantRow | null> {
  if (!isUuid(uuid)) return null;
  return db.maybeOneFirst(sql.type(assistantColumn)`${selectAssistant} WHERE a.uuid = ${uuid}::uuid`);
}
