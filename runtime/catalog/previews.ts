import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { wavHeader } from '../voice/audio.js';
import { PlatformError } from '../errors.js';
import type { Logger } from '../logger.js';
import { samplesToBytes } from '../voice/audio.js';
import type { TtsProvider } from '../voice/providers/types.js';
import type { CatalogService } from './service.js';

/**
 * Voice previews: a short sample ("Hello, I'm Rachel. How can I help you today?", in the voice's
 * language where a sentence is written for it) rendered by the voice's own synthesizer: the
 * vendor's when its key is configured, else the dev voice. Each is rendered once and kept as a
 * mono 16 kHz WAV under `DATA_DIR/voice-previews`, named after what made it (voice, provider,
 * text), so a key configured later renders it again with the vendor; concurrent requests for one
 * that is not there yet wait for the same rendering.
 */

/** The sample in the languages the catalog has voices in; others hear English. */
const SAMPLES: Readonly<Record<string, (name: string) => string>> = {
  en: (name) => `Hello, I'm ${name}. How can I help you today?`,
  de: (name) => `Hallo, ich bin ${name}. Wie kann ich Ihnen heute helfen?`,
  fr: (name) => `Bonjour, je suis ${name}. Comment puis-je vous aider aujourd'hui ?`,
  es: (name) => `Hola, soy ${name}. ¿En qué puedo ayudarle hoy?`,
  it: (name) => `Ciao, sono ${name}. Come posso aiutarla oggi?`,
  pt: (name) => `Olá, eu sou ${name}. Como posso ajudar hoje?`,
  nl: (name) => `Hallo, ik ben ${name}. Hoe kan ik u vandaag helpen?`,
  pl: (name) => `Dzień dobry, jestem ${name}. Jak mogę dziś pomóc?`,
};

/** The longest a preview may take to render. */
const RENDER_TIMEOUT_MS = 30_000;

export interface VoicePreviewDeps {
  readonly catalog: CatalogService;
  /** The synthesizer of a catalog provider code (the dev voice when it has no key). */
  readonly tts: (code: string) => TtsProvider;
  readonly dataDir: string;
  /** DEV_VOICE: a dev preview made with the tone is not the one made with espeak-ng. */
  readonly devVoice: string;
  readonly logger: Logger;
}

export function createVoicePreviews({ catalog, tts, dataDir, devVoice, logger }: VoicePreviewDeps) {
  const dir = join(dataDir, 'voice-previews');
  const rendering = new Map<string, Promise<Buffer>>();

  async function render(path: string, provider: TtsProvider, request: { voiceId: number; text: string; voice: string; language: string }): Promise<Buffer> {
    const chunks: Buffer[] = [];
    const started = performance.now();
    const signal = AbortSignal.timeout(RENDER_TIMEOUT_MS);
    for await (const chunk of provider.synthesize({ text: request.text, voice: request.voice, language: request.language, speed: 1, stability: 0.5, similarity: 0.75, emotion: false, signal })) {
      chunks.push(Buffer.from(samplesToBytes(chunk)));
    }
    const samples = Buffer.concat(chunks);
    const wav = Buffer.concat([wavHeader(samples.length, 1), samples]);
    await mkdir(dir, { recursive: true });
    // Whole or not at all: a stop mid-write leaves no half file to serve.
    await writeFile(`${path}.tmp`, wav);
    await rename(`${path}.tmp`, path);
    logger.info({ voiceId: request.voiceId, provider: provider.name, ms: Math.round(performance.now() - started), bytes: wav.length }, 'voice preview rendered');
    return wav;
  }

  return {
    /**
     * The preview of catalog voice `voiceId` as WAV bytes, rendered on first use.
     * @throws PlatformError `voice_not_found` for a voice the catalog does not have.
     */
    async preview(voiceId: number): Promise<Buffer> {
      const current = await catalog.get();
      const voice = Number.isSafeInteger(voiceId) ? current.voices.get(voiceId) : undefined;
      if (!voice) throw new PlatformError('voice_not_found');
      // A realtime model's own voices (no synthesizer) are OpenAI's, which its TTS also speaks.
      const code = voice.synthesizer_provider_id === null ? 'openai' : current.providers.get(voice.synthesizer_provider_id)?.code ?? 'dev';
      const language = (voice.language_id === null ? undefined : current.languages.get(voice.language_id)?.iso_2) ?? 'en';
      const name = voice.name.replace(/\s*\(.*\)\s*$/, '');
      const text = (SAMPLES[language] ?? SAMPLES.en!)(name);
      const provider = tts(code);
      const key = createHash('sha256').update(`${provider.name === 'dev' ? `dev-${devVoice}` : provider.name}|${voice.provider_voice_id}|${language}|${text}`).digest('hex').slice(0, 16);
      const path = join(dir, `${voice.id}-${key}.wav`);
      const cached = await readFile(path).catch(() => undefined);
      if (cached) return cached;
      let pending = rendering.get(path);
      if (!pending) {
        pending = render(path, provider, { voiceId: voice.id, text, voice: voice.provider_voice_id, language }).finally(() => rendering.delete(path));
        rendering.set(path, pending);
      }
      return pending;
    },
  };
}

export type VoicePreviews = ReturnType<typeof createVoicePreviews>;
