import { ValidationError } from '../../runtime/errors.js';
import type { CatalogService } from '../../runtime/catalog/service.js';
import type { VoicePreviews } from '../../runtime/catalog/previews.js';
import { modelsQuerySchema, voicesQuerySchema } from '../../schemas/catalog.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body, media } from '../http/contract.js';
import { array, dataOf, object } from '../../schemas/shapes.js';
import { language, model, provider, voice } from '../../schemas/responses.js';

const tag = 'Catalogs';

/** `publicUrl`: the origin a voice's `preview_url` is an absolute URL on. */
export function catalogRoutes(catalog: CatalogService, previews: VoicePreviews, publicUrl: () => string): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/api/user/assistants/languages',
      auth: 'user',
      tag,
      summary: 'Languages (a plain array): id is used as language_id and in secondary_language_ids',
      responses: { 200: body(array(language, 'Every language (a plain array)')) },
      async handler() {
        const { rows } = await catalog.get();
        return json(200, rows.languages.map(({ id, name, iso_2 }) => ({ id, name, iso_2 })));
      },
    },
    {
      method: 'GET',
      path: '/api/user/assistants/voices',
      auth: 'user',
      tag,
      summary: 'Voices, filtered by engine mode and language',
      querySchema: voicesQuerySchema.schema,
      responses: { 200: body(dataOf(array(voice, 'The voices'), 'Voices that fit the filters')) },
      async handler(req) {
        const query = voicesQuerySchema(req.query);
        const current = await catalog.get();
        if (query.language_id !== undefined && !current.languages.has(query.language_id)) {
          throw ValidationError.field('language_id', 'The selected language id is invalid.');
        }
        const data = current.voicesFor({ mode: query.mode, languageId: query.language_id }).map((voice) => ({
          id: voice.id,
          name: voice.name,
          language_id: voice.language_id,
          gender: voice.gender,
          accent: voice.accent,
          age: voice.age,
          preview_url: voice.preview_url ?? `${publicUrl()}/api/voices/${voice.id}/preview.wav`,
          synthesizer_provider_id: voice.synthesizer_provider_id,
          modes: voice.modes,
        }));
        return json(200, { data });
      },
    },
    {
      method: 'GET',
      path: '/api/user/assistants/models',
      auth: 'user',
      tag,
      summary: 'Models: llm for pipeline and chat, multimodal for realtime speech',
      querySchema: modelsQuerySchema.schema,
      responses: { 200: body(dataOf(array(model, 'The models'), 'Models of the type')) },
      async handler(req) {
        const { type } = modelsQuerySchema(req.query);
        const data = (await catalog.get()).modelsOfType(type).map(({ id, name, code, provider }) => ({ id, name, code, provider }));
        return json(200, { data });
      },
    },
    {
      method: 'GET',
      path: '/api/user/assistants/providers',
      auth: 'user',
      tag,
      summary: 'Speech providers: synthesizers (TTS) and transcribers (STT)',
      responses: { 200: body(dataOf(object({ synthesizers: array(provider, 'Text-to-speech providers'), transcribers: array(provider, 'Speech-to-text providers') }, 'Providers by kind'), 'Speech providers')) },
      async handler() {
        const { rows } = await catalog.get();
        const of = (kind: 'synthesizer' | 'transcriber') => rows.providers.filter((p) => p.kind === kind).map(({ id, name, code }) => ({ id, name, code }));
        return json(200, { data: { synthesizers: of('synthesizer'), transcribers: of('transcriber') } });
      },
    },
    {
      method: 'GET',
      path: '/api/voices/:id/preview.wav',
      auth: 'none',
      tag,
      summary: "A voice's sample (mono 16 kHz WAV): a short greeting in its language by its own synthesizer, rendered once and cached; 404 {message} for an unknown voice",
      responses: { 200: media('audio/wav', 'The sample: RIFF PCM16, mono, 16 kHz') },
      async handler(req) {
        const id = /^\d{1,9}$/.test(req.params.id ?? '') ? Number(req.params.id) : Number.NaN;
        const wav = await previews.preview(id);
        return { status: 200, body: wav, headers: { 'Content-Type': 'audio/wav', 'Cache-Control': 'public, max-age=86400', 'Content-Disposition': `inline; filename="voice-${id}.wav"` } };
      },
    },
  ];
}
