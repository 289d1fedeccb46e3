-- Messaging channels: an owner's WhatsApp Business number or SMS number answered by one of their
-- assistants. Inbound messages are kept before the webhook is acknowledged and answered in order
-- per conversation; replies wait in an outbox until the channel's API took them.

ALTER TABLE conversations DROP CONSTRAINT conversations_type_check;
ALTER TABLE conversations ADD CONSTRAINT conversations_type_check CHECK (type IN ('test', 'widget', 'whatsapp', 'api', 'sms'));

CREATE TABLE channels (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id             bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  assistant_id        bigint NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  type                text NOT NULL CHECK (type IN ('whatsapp', 'sms')),
  -- WhatsApp: the Business phone number id; SMS: the number itself (E.164), from phone_number_id.
  address             text NOT NULL,
  phone_number_id     bigint REFERENCES phone_numbers (id) ON DELETE CASCADE,
  -- AES-256-GCM of the secrets' JSON (WhatsApp's access token, app secret and verify token).
  sealed_secrets      bytea,
  -- HMAC-SHA256 (under the sealing key) of the WhatsApp verify token: the verification handshake names no number.
  verify_token_digest bytea,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (type, address)
);
CREATE INDEX channels_user ON channels (user_id, id);
CREATE INDEX channels_verify_token ON channels (verify_token_digest) WHERE verify_token_digest IS NOT NULL;

ALTER TABLE conversations
  ADD COLUMN channel_id        bigint REFERENCES channels (id) ON DELETE SET NULL,
  ADD COLUMN customer_phone    text,
  ADD COLUMN last_customer_at  timestamptz,
  -- The polite "cannot answer now" was sent for a lack of balance; cleared by the next answer.
  ADD COLUMN balance_notice_at timestamptz,
  -- The process answering the conversation's inbound messages, in order, and until when.
  ADD COLUMN inbox_owner       uuid,
  ADD COLUMN inbox_until       timestamptz;
CREATE INDEX conversations_channel_customer ON conversations (channel_id, customer_phone, last_customer_at DESC) WHERE channel_id IS NOT NULL;

ALTER TABLE conversation_messages
  ADD COLUMN delivery_status text CHECK (delivery_status IN ('pending', 'sent', 'delivered', 'read', 'failed', 'received'));

CREATE TABLE channel_inbound (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  channel_id      bigint NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  -- The channel's id of the message (WhatsApp's wamid, Twilio's MessageSid): a retried webhook repeats it.
  external_id     text NOT NULL,
  conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  kind            text NOT NULL,
  body            text NOT NULL,
  media           jsonb,
  done            boolean NOT NULL DEFAULT false,
  -- The customer message the engine stored for it: an answer cut short (a stop, a kill) is taken
  -- back before the message is answered again, so the history holds it once.
  message_id      bigint REFERENCES conversation_messages (id) ON DELETE SET NULL,
  -- Attempts that failed unexpectedly (a database error): retried by the sweep, passed over after 3.
  attempts        integer NOT NULL DEFAULT 0,
  received_at     timestamptz NOT NULL DEFAULT now(),
  UNIQUE (channel_id, external_id)
);
CREATE INDEX channel_inbound_pending ON channel_inbound (conversation_id, id) WHERE NOT done;
CREATE INDEX channel_inbound_conversation ON channel_inbound (conversation_id);

CREATE TABLE channel_outbound (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  channel_id      bigint NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  message_id      bigint NOT NULL REFERENCES conversation_messages (id) ON DELETE CASCADE,
  part            integer NOT NULL,
  recipient       text NOT NULL,
  body            text NOT NULL,
  state           text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'sending', 'sent', 'delivered', 'read', 'failed')),
  external_id     text,
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  lease_until     timestamptz,
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (message_id, part)
);
CREATE INDEX channel_outbound_due ON channel_outbound (next_attempt_at) WHERE state IN ('queued', 'sending');
CREATE INDEX channel_outbound_conversation ON channel_outbound (conversation_id, id) WHERE state IN ('queued', 'sending');
-- For the cascades of a deleted channel, conversation or user.
CREATE INDEX channel_outbound_channel ON channel_outbound (channel_id);
CREATE INDEX channel_outbound_conversation_all ON channel_outbound (conversation_id);
CREATE UNIQUE INDEX channel_outbound_external ON channel_outbound (channel_id, external_id) WHERE external_id IS NOT NULL;

-- Status reports that came before their part was recorded with the channel's id (the vendor's
-- webhook may outrun the send's own write): applied when it is, dropped after ten minutes
-- (reports on messages sent from the number by other software are never matched).
CREATE TABLE channel_early_statuses (
  channel_id  bigint NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  external_id text NOT NULL,
  status      text NOT NULL CHECK (status IN ('sent', 'delivered', 'read', 'failed')),
  error       text,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX channel_early_statuses_id ON channel_early_statuses (channel_id, external_id);
CREATE INDEX channel_early_statuses_age ON channel_early_statuses (received_at);
