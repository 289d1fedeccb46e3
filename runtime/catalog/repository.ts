import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export const languageRow = z.object({
  id: z.number(),
  name: z.string(),
  iso_2: z.string(),
  locale: z.string(),
  default_synthesizer_provider_id: z.number(),
  default_transcriber_provider_id: z.number(),
});
export const providerRow = z.object({ id: z.number(), kind: z.enum(['synthesizer', 'transcriber']), name: z.string(), code: z.string() });
export const voiceRow = z.object({
  id: z.number(),
  name: z.string(),
  language_id: z.number().nullable(),
  gender: z.string(),
  accent: z.string(),
  age: z.string(),
  preview_url: z.string().nullable(),
  synthesizer_provider_id: z.number().nullable(),
  provider_voice_id: z.string(),
  modes: z.array(z.enum(['pipeline', 'multimodal', 'dualplex'])),
});
export const modelRow = z.object({ id: z.number(), type: z.enum(['llm', 'multimodal']), name: z.string(), code: z.string(), provider: z.string() });

export type LanguageRow = z.infer<typeof languageRow>;
export type ProviderRow = z.infer<typeof providerRow>;
export type VoiceRow = z.infer<typeof voiceRow>;
export type ModelRow = z.infer<typeof modelRow>;

export interface CatalogRows {
  readonly languages: readonly LanguageRow[];
  readonly providers: readonly ProviderRow[];
  readonly voices: readonly VoiceRow[];
  readonly models: readonly ModelRow[];
}

export async function loadCatalog(db: CommonQueryMethods): Promise<CatalogRows> {
  const [languages, providers, voices, models] = await Promise.all([
    db.any(sql.type(languageRow)`SELECT id, name, iso_2, locale, default_synthesizer_provider_id, default_transcriber_provider_id FROM languages ORDER BY id`),
    db.any(sql.type(providerRow)`SELECT id, kind, name, code FROM speech_providers ORDER BY id`),
    db.any(sql.type(voiceRow)`SELECT id, name, language_id, gender, accent, age, preview_url, synthesizer_provider_id, provider_voice_id, modes FROM voices ORDER BY id`),
    db.any(sql.type(modelRow)`SELECT id, type, name, code, provider FROM ai_models ORDER BY id`),
  ]);
  return { languages, providers, voices, models };
}
