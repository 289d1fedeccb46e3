-- Knowledgebases and their documents, the document job queue, mid-call tools and assistants.

CREATE TABLE knowledgebases (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name        text NOT NULL,
  description text,
  status      text NOT NULL DEFAULT 'empty' CHECK (status IN ('empty', 'processing', 'active', 'failed')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledgebases_user ON knowledgebases (user_id, id);

-- `source` holds what to ingest: {url, relative_links_limit} or {links} for websites,
-- {path, filename, content_type, size} (path relative to DATA_DIR) for uploads.
CREATE TABLE documents (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  knowledgebase_id bigint NOT NULL REFERENCES knowledgebases (id) ON DELETE CASCADE,
  user_id          bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name             text NOT NULL,
  description      text,
  type             text NOT NULL CHECK (type IN ('website', 'pdf', 'txt', 'docx')),
  status           text NOT NULL DEFAULT 'processing' CHECK (status IN ('processing', 'active', 'failed')),
  error            text,
  source           jsonb NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX documents_knowledgebase ON documents (knowledgebase_id, id);

-- Durable ingestion jobs, claimed with FOR UPDATE SKIP LOCKED under an expiring lease.
CREATE TABLE document_jobs (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  document_id      bigint NOT NULL UNIQUE REFERENCES documents (id) ON DELETE CASCADE,
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'done', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  run_after        timestamptz NOT NULL DEFAULT now(),
  lease_expires_at timestamptz,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX document_jobs_ready ON document_jobs (run_after) WHERE status IN ('pending', 'running');

CREATE TABLE tools (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name        text NOT NULL,
  description text NOT NULL,
  endpoint    text NOT NULL,
  method      text NOT NULL CHECK (method IN ('GET', 'POST', 'PUT', 'PATCH', 'DELETE')),
  timeout     integer NOT NULL DEFAULT 10 CHECK (timeout BETWEEN 1 AND 30),
  headers     jsonb NOT NULL DEFAULT '[]',
  schema      jsonb NOT NULL DEFAULT '[]',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tools_user ON tools (user_id, id);

-- Assistants: every field of spec 2.5. Mode-specific settings are nullable; the service fills
-- the new mode's defaults when the mode changes.
CREATE TABLE assistants (
  id                             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  uuid                           uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  user_id                        bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name                           text NOT NULL,
  status                         text NOT NULL DEFAULT 'inactive' CHECK (status IN ('inactive', 'active')),
  type                           text NOT NULL CHECK (type IN ('inbound', 'outbound')),
  mode                           text NOT NULL CHECK (mode IN ('pipeline', 'multimodal', 'dualplex')),
  voice_id                       integer NOT NULL REFERENCES voices (id),
  language_id                    integer NOT NULL REFERENCES languages (id),
  timezone                       text NOT NULL,
  initial_message                text NOT NULL,
  system_prompt                  text NOT NULL,
  llm_model_id                   integer REFERENCES ai_models (id),
  multimodal_model_id            integer REFERENCES ai_models (id),
  chat_llm_fallback_id           integer REFERENCES ai_models (id),
  turn_detection_threshold       double precision,
  secondary_language_ids         integer[] NOT NULL DEFAULT '{}',
  knowledgebase_id               bigint REFERENCES knowledgebases (id) ON DELETE SET NULL,
  knowledgebase_mode             text NOT NULL CHECK (knowledgebase_mode IN ('function_call', 'prompt')),
  phone_number_id                bigint REFERENCES phone_numbers (id) ON DELETE SET NULL,
  tools                          jsonb NOT NULL DEFAULT '[]',
  tts_emotion_enabled            boolean NOT NULL DEFAULT true,
  voice_stability                double precision NOT NULL DEFAULT 0.70,
  voice_similarity               double precision NOT NULL DEFAULT 0.50,
  speech_speed                   double precision NOT NULL DEFAULT 1.00,
  llm_temperature                double precision NOT NULL DEFAULT 0.10,
  synthesizer_provider_id        integer REFERENCES speech_providers (id),
  transcriber_provider_id        integer REFERENCES speech_providers (id),
  allow_interruptions            boolean NOT NULL DEFAULT true,
  fillers                        boolean NOT NULL DEFAULT false,
  record                         boolean NOT NULL DEFAULT false,
  enable_noise_cancellation      boolean NOT NULL DEFAULT true,
  wait_for_customer              boolean NOT NULL DEFAULT false,
  max_duration                   integer NOT NULL DEFAULT 600,
  max_silence_duration           integer NOT NULL DEFAULT 40,
  max_initial_silence_duration   integer,
  ringing_time                   integer NOT NULL DEFAULT 30,
  reengagement_interval          integer NOT NULL DEFAULT 30,
  reengagement_prompt            text,
  end_call_on_voicemail          boolean NOT NULL DEFAULT true,
  voice_mail_message             text,
  endpoint_type                  text NOT NULL DEFAULT 'vad' CHECK (endpoint_type IN ('vad', 'ai')),
  endpoint_sensitivity           double precision NOT NULL DEFAULT 0.5,
  interrupt_sensitivity          double precision NOT NULL DEFAULT 0.5,
  min_interrupt_words            integer,
  ambient_sound                  text NOT NULL DEFAULT 'off' CHECK (ambient_sound IN ('off', 'office', 'city', 'forest', 'crowded_room', 'cafe', 'nature')),
  ambient_sound_volume           double precision NOT NULL DEFAULT 0.5,
  is_webhook_active              boolean NOT NULL DEFAULT false,
  webhook_url                    text,
  send_webhook_only_on_completed boolean NOT NULL DEFAULT true,
  include_recording_in_webhook   boolean NOT NULL DEFAULT true,
  post_call_evaluation           boolean NOT NULL DEFAULT true,
  post_call_schema               jsonb NOT NULL DEFAULT '[]',
  variables                      jsonb NOT NULL DEFAULT '{}',
  created_at                     timestamptz NOT NULL DEFAULT now(),
  updated_at                     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX assistants_user ON assistants (user_id, id);
CREATE INDEX assistants_knowledgebase ON assistants (knowledgebase_id) WHERE knowledgebase_id IS NOT NULL;
-- One inbound assistant per number (spec 4.4 rule 5); the database holds the line under races.
CREATE UNIQUE INDEX assistants_inbound_number_key ON assistants (phone_number_id) WHERE type = 'inbound' AND phone_number_id IS NOT NULL;

CREATE TABLE assistant_tools (
  assistant_id bigint NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  tool_id      bigint NOT NULL REFERENCES tools (id) ON DELETE CASCADE,
  PRIMARY KEY (assistant_id, tool_id)
);
CREATE INDEX assistant_tools_tool ON assistant_tools (tool_id);
