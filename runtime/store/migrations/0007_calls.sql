-- Calls (spec 2.10) and the campaigns they may belong to. A call keeps the assistant's name as it
-- was, so its record reads the same after the assistant is renamed or deleted.

CREATE TABLE campaigns (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX campaigns_user ON campaigns (user_id, id);

CREATE TABLE calls (
  id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id                bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  assistant_id           bigint REFERENCES assistants (id) ON DELETE SET NULL,
  assistant_name         text NOT NULL,
  campaign_id            bigint REFERENCES campaigns (id) ON DELETE SET NULL,
  type                   text NOT NULL CHECK (type IN ('inbound', 'outbound', 'web')),
  mode                   text NOT NULL CHECK (mode IN ('pipeline', 'multimodal', 'dualplex')),
  status                 text NOT NULL CHECK (status IN ('initiated', 'ringing', 'busy', 'in-progress', 'ended', 'completed', 'ended_by_customer', 'ended_by_assistant', 'no-answer', 'failed')),
  duration               integer NOT NULL DEFAULT 0,
  assistant_phone_number text,
  client_phone_number    text,
  transcript             text NOT NULL DEFAULT '',
  variables              jsonb NOT NULL DEFAULT '{}',
  evaluation             jsonb,
  webhook_response       jsonb,
  carrier_cost           numeric(18, 6) NOT NULL DEFAULT 0,
  total_cost             numeric(18, 6) NOT NULL DEFAULT 0,
  answered_by            text CHECK (answered_by IN ('human', 'machine', 'unknown')),
  recording_path         text,
  carrier_call_id        text,
  answered_at            timestamptz,
  ended_at               timestamptz,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now()
);
-- Each listing filter has an index that also gives the order (newest first), so a page is an
-- index range scan at any table size.
CREATE INDEX calls_user_created ON calls (user_id, created_at DESC, id DESC);
CREATE INDEX calls_user_status_created ON calls (user_id, status, created_at DESC, id DESC);
CREATE INDEX calls_user_type_created ON calls (user_id, type, created_at DESC, id DESC);
CREATE INDEX calls_user_assistant_created ON calls (user_id, assistant_id, created_at DESC, id DESC);
CREATE INDEX calls_user_campaign_created ON calls (user_id, campaign_id, created_at DESC, id DESC) WHERE campaign_id IS NOT NULL;
CREATE INDEX calls_user_client_created ON calls (user_id, client_phone_number, created_at DESC, id DESC);
CREATE UNIQUE INDEX calls_carrier_call_key ON calls (carrier_call_id) WHERE carrier_call_id IS NOT NULL;
