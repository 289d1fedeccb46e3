import type { DatabasePool } from 'slonik';
import { loadCatalog, type CatalogRows, type LanguageRow, type ModelRow, type ProviderRow, type VoiceRow } from './repository.js';

export type EngineMode = 'pipeline' | 'multimodal' | 'dualplex';

/**
 * Languages, speech providers, voices and models. They change only with a migration, so they are
 * read once (on first use) and served from memory; assistants validate against the same copy.
 */
export class Catalog {
  readonly languages: ReadonlyMap<number, LanguageRow>;
  readonly providers: ReadonlyMap<number, ProviderRow>;
  readonly voices: ReadonlyMap<number, VoiceRow>;
  readonly models: ReadonlyMap<number, ModelRow>;

  constructor(readonly rows: CatalogRows) {
    this.languages = new Map(rows.languages.map((row) => [row.id, row]));
    this.providers = new Map(rows.providers.map((row) => [row.id, row]));
    this.voices = new Map(rows.voices.map((row) => [row.id, row]));
    this.models = new Map(rows.models.map((row) => [row.id, row]));
  }

  /** Voices usable in `mode`, speaking `languageId` (multilingual voices included). */
  voicesFor(filter: { mode?: EngineMode; languageId?: number }): VoiceRow[] {
    return this.rows.voices.filter(
      (voice) =>
        (filter.mode === undefined || voice.modes.includes(filter.mode)) &&
        (filter.languageId === undefined || voice.language_id === null || voice.language_id === filter.languageId),
    );
  }

  modelsOfType(type?: 'llm' | 'multimodal'): ModelRow[] {
    return this.rows.models.filter((model) => type === undefined || model.type === type);
  }

  provider(id: number, kind: ProviderRow['kind']): ProviderRow | undefined {
    const row = this.providers.get(id);
    return row?.kind === kind ? row : undefined;
  }

  /**
   * The catalog code of the transcriber that hears an assistant (calls, voice messages): its own
   * provider, else its language's default; `dev` when neither is known.
   */
  transcriberCode(assistant: { readonly transcriber_provider_id: number | null; readonly language_id: number }): string {
    const id = assistant.transcriber_provider_id ?? this.languages.get(assistant.language_id)?.default_transcriber_provider_id;
    return (id === undefined ? undefined : this.providers.get(id)?.code) ?? 'dev';
  }

  model(id: number, type: ModelRow['type']): ModelRow | undefined {
    const row = this.models.get(id);
    return row?.type === type ? row : undefined;
  }
}

export function createCatalogService({ pool }: { pool: DatabasePool }) {
  let loading: Promise<Catalog> | undefined;
  return {
    /** The catalog, loaded from the database once. */
    get(): Promise<Catalog> {
      loading ??= loadCatalog(pool).then(
        (rows) => new Catalog(rows),
        (error: unknown) => {
          loading = undefined;
          throw error;
        },
      );
      return loading;
    },
  };
}

export type CatalogService = ReturnType<typeof createCatalogService>;
