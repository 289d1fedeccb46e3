-- Catalogs the configuration API reads: languages, speech providers, voices, models.

CREATE TABLE speech_providers (
  id   integer PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('synthesizer', 'transcriber')),
  name text NOT NULL,
  code text NOT NULL,
  UNIQUE (kind, code)
);

INSERT INTO speech_providers (id, kind, name, code) VALUES
  (1, 'synthesizer', 'ElevenLabs', 'elevenlabs'),
  (2, 'synthesizer', 'OpenAI TTS', 'openai'),
  (3, 'synthesizer', 'Azure Speech', 'azure'),
  (4, 'synthesizer', 'Built-in development voice (no network)', 'dev'),
  (11, 'transcriber', 'Deepgram', 'deepgram'),
  (12, 'transcriber', 'OpenAI Transcribe', 'openai'),
  (13, 'transcriber', 'Azure Speech', 'azure'),
  (14, 'transcriber', 'Built-in development transcriber (no network)', 'dev');

CREATE TABLE languages (
  id                              integer PRIMARY KEY,
  name                            text NOT NULL,
  iso_2                           text NOT NULL UNIQUE,
  locale                          text NOT NULL,
  default_synthesizer_provider_id integer NOT NULL REFERENCES speech_providers (id),
  default_transcriber_provider_id integer NOT NULL REFERENCES speech_providers (id)
);

INSERT INTO languages (id, name, iso_2, locale, default_synthesizer_provider_id, default_transcriber_provider_id) VALUES
  (1, 'English', 'en', 'en-US', 1, 11),
  (2, 'German', 'de', 'de-DE', 1, 11),
  (3, 'French', 'fr', 'fr-FR', 1, 11),
  (4, 'Spanish', 'es', 'es-ES', 1, 11),
  (5, 'Italian', 'it', 'it-IT', 1, 11),
  (6, 'Portuguese', 'pt', 'pt-BR', 1, 11),
  (7, 'Dutch', 'nl', 'nl-NL', 1, 11),
  (8, 'Polish', 'pl', 'pl-PL', 1, 11),
  (9, 'Finnish', 'fi', 'fi-FI', 3, 13),
  (10, 'Danish', 'da', 'da-DK', 3, 11),
  (11, 'Swedish', 'sv', 'sv-SE', 1, 11),
  (12, 'Norwegian', 'no', 'nb-NO', 3, 11),
  (13, 'Hebrew', 'he', 'he-IL', 3, 13),
  (14, 'Arabic', 'ar', 'ar-SA', 3, 13),
  (15, 'Hindi', 'hi', 'hi-IN', 1, 11),
  (16, 'Japanese', 'ja', 'ja-JP', 1, 11),
  (17, 'Korean', 'ko', 'ko-KR', 1, 11),
  (18, 'Chinese', 'zh', 'zh-CN', 3, 11),
  (19, 'Russian', 'ru', 'ru-RU', 1, 11),
  (20, 'Turkish', 'tr', 'tr-TR', 1, 11),
  (21, 'Ukrainian', 'uk', 'uk-UA', 1, 11),
  (22, 'Czech', 'cs', 'cs-CZ', 1, 11),
  (23, 'Greek', 'el', 'el-GR', 3, 13),
  (24, 'Romanian', 'ro', 'ro-RO', 1, 11);

-- A TTS voice works in pipeline and dualplex; a realtime model's own voice only in multimodal.
-- language_id null: the voice speaks every language.
CREATE TABLE voices (
  id                      integer PRIMARY KEY,
  name                    text NOT NULL,
  language_id             integer REFERENCES languages (id),
  gender                  text NOT NULL CHECK (gender IN ('female', 'male', 'neutral')),
  accent                  text NOT NULL,
  age                     text NOT NULL CHECK (age IN ('young', 'middle_aged', 'old')),
  preview_url             text,
  synthesizer_provider_id integer REFERENCES speech_providers (id),
  provider_voice_id       text NOT NULL,
  modes                   text[] NOT NULL
);
CREATE INDEX voices_language ON voices (language_id);

INSERT INTO voices (id, name, language_id, gender, accent, age, synthesizer_provider_id, provider_voice_id, modes) VALUES
  (1, 'Rachel', 1, 'female', 'american', 'young', 1, '21m00Tcm4TlvDq8ikWAM', '{pipeline,dualplex}'),
  (2, 'Adam', 1, 'male', 'american', 'middle_aged', 1, 'pNInz6obpgDQGcFmaJgB', '{pipeline,dualplex}'),
  (3, 'Charlotte', 1, 'female', 'british', 'middle_aged', 1, 'XB0fDUnXU5powFXDhCwa', '{pipeline,dualplex}'),
  (4, 'Daniel', 1, 'male', 'british', 'middle_aged', 1, 'onwK4e9ZLuTAKqWW03F9', '{pipeline,dualplex}'),
  (5, 'Matilda', 1, 'female', 'australian', 'young', 1, 'XrExE9yKIg1WjnnlVkGX', '{pipeline,dualplex}'),
  (6, 'Hannah', 2, 'female', 'german', 'young', 1, 'de-hannah-v2', '{pipeline,dualplex}'),
  (7, 'Lukas', 2, 'male', 'german', 'middle_aged', 1, 'de-lukas-v2', '{pipeline,dualplex}'),
  (8, 'Camille', 3, 'female', 'parisian', 'young', 1, 'fr-camille-v2', '{pipeline,dualplex}'),
  (9, 'Louis', 3, 'male', 'parisian', 'middle_aged', 1, 'fr-louis-v2', '{pipeline,dualplex}'),
  (10, 'Lucia', 4, 'female', 'castilian', 'young', 1, 'es-lucia-v2', '{pipeline,dualplex}'),
  (11, 'Mateo', 4, 'male', 'mexican', 'middle_aged', 1, 'es-mateo-v2', '{pipeline,dualplex}'),
  (12, 'Giulia', 5, 'female', 'roman', 'young', 1, 'it-giulia-v2', '{pipeline,dualplex}'),
  (13, 'Beatriz', 6, 'female', 'brazilian', 'young', 1, 'pt-beatriz-v2', '{pipeline,dualplex}'),
  (14, 'Sanne', 7, 'female', 'dutch', 'middle_aged', 1, 'nl-sanne-v2', '{pipeline,dualplex}'),
  (15, 'Zofia', 8, 'female', 'polish', 'young', 1, 'pl-zofia-v2', '{pipeline,dualplex}'),
  (16, 'Alloy (TTS)', 1, 'neutral', 'american', 'middle_aged', 2, 'alloy', '{pipeline,dualplex}'),
  (17, 'Nova (TTS)', 1, 'female', 'american', 'young', 2, 'nova', '{pipeline,dualplex}'),
  (18, 'Onyx (TTS)', 1, 'male', 'american', 'middle_aged', 2, 'onyx', '{pipeline,dualplex}'),
  (19, 'Shimmer (TTS)', 1, 'female', 'american', 'young', 2, 'shimmer', '{pipeline,dualplex}'),
  (20, 'Fable (TTS)', 1, 'male', 'british', 'middle_aged', 2, 'fable', '{pipeline,dualplex}'),
  (21, 'Aino', 9, 'female', 'finnish', 'young', 3, 'fi-FI-SelmaNeural', '{pipeline,dualplex}'),
  (22, 'Christel', 10, 'female', 'danish', 'middle_aged', 3, 'da-DK-ChristelNeural', '{pipeline,dualplex}'),
  (23, 'Finn', 12, 'male', 'norwegian', 'middle_aged', 3, 'nb-NO-FinnNeural', '{pipeline,dualplex}'),
  (24, 'Hila', 13, 'female', 'israeli', 'young', 3, 'he-IL-HilaNeural', '{pipeline,dualplex}'),
  (25, 'Avri', 13, 'male', 'israeli', 'middle_aged', 3, 'he-IL-AvriNeural', '{pipeline,dualplex}'),
  (26, 'Zariyah', 14, 'female', 'saudi', 'young', 3, 'ar-SA-ZariyahNeural', '{pipeline,dualplex}'),
  (27, 'Xiaoxiao', 18, 'female', 'mandarin', 'young', 3, 'zh-CN-XiaoxiaoNeural', '{pipeline,dualplex}'),
  (28, 'Athina', 23, 'female', 'greek', 'middle_aged', 3, 'el-GR-AthinaNeural', '{pipeline,dualplex}'),
  (29, 'Jenny (Azure)', 1, 'female', 'american', 'middle_aged', 3, 'en-US-JennyNeural', '{pipeline,dualplex}'),
  (30, 'Dev Voice', NULL, 'neutral', 'neutral', 'middle_aged', 4, 'dev', '{pipeline,dualplex}'),
  (31, 'Alloy', NULL, 'neutral', 'american', 'middle_aged', NULL, 'alloy', '{multimodal}'),
  (32, 'Ash', NULL, 'male', 'american', 'middle_aged', NULL, 'ash', '{multimodal}'),
  (33, 'Ballad', NULL, 'male', 'british', 'middle_aged', NULL, 'ballad', '{multimodal}'),
  (34, 'Coral', NULL, 'female', 'american', 'young', NULL, 'coral', '{multimodal}'),
  (35, 'Sage', NULL, 'female', 'american', 'middle_aged', NULL, 'sage', '{multimodal}'),
  (36, 'Verse', NULL, 'male', 'american', 'young', NULL, 'verse', '{multimodal}');

-- Models: `llm` for pipeline (and text chat), `multimodal` for realtime speech-to-speech.
-- `provider` names an entry of the provider configuration; `dev` needs no network.
CREATE TABLE ai_models (
  id       integer PRIMARY KEY,
  type     text NOT NULL CHECK (type IN ('llm', 'multimodal')),
  name     text NOT NULL,
  code     text NOT NULL,
  provider text NOT NULL
);

INSERT INTO ai_models (id, type, name, code, provider) VALUES
  (1, 'llm', 'GPT-4o mini', 'gpt-4o-mini', 'openai'),
  (2, 'llm', 'GPT-4o', 'gpt-4o', 'openai'),
  (3, 'llm', 'GPT-4.1 mini', 'gpt-4.1-mini', 'openai'),
  (4, 'llm', 'Llama 3.3 70B (Groq)', 'llama-3.3-70b-versatile', 'groq'),
  (5, 'llm', 'Llama 3.1 8B Instant (Groq)', 'llama-3.1-8b-instant', 'groq'),
  (6, 'llm', 'Development LLM (no network)', 'dev', 'dev'),
  (21, 'multimodal', 'GPT Realtime', 'gpt-realtime', 'openai'),
  (22, 'multimodal', 'GPT-4o Realtime', 'gpt-4o-realtime-preview', 'openai'),
  (23, 'multimodal', 'GPT-4o mini Realtime', 'gpt-4o-mini-realtime-preview', 'openai'),
  (24, 'multimodal', 'Development realtime model (no network)', 'dev-realtime', 'dev');
