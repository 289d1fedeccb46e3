-- Text conversations with assistants and their messages. A conversation outlives its assistant
-- (what was paid for stays readable); `user_id` is the assistant owner's, who pays.

CREATE TABLE conversations (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  assistant_id  bigint REFERENCES assistants (id) ON DELETE SET NULL,
  user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  type          text NOT NULL CHECK (type IN ('test', 'widget', 'whatsapp', 'api')),
  variables     jsonb NOT NULL DEFAULT '{}',
  ai_enabled    boolean NOT NULL DEFAULT true,
  message_count integer NOT NULL DEFAULT 0,
  total_cost    numeric(18, 6) NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversations_user_created ON conversations (user_id, created_at DESC, id);
CREATE INDEX conversations_assistant_created ON conversations (assistant_id, created_at DESC);

CREATE TABLE conversation_messages (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  role            text NOT NULL CHECK (role IN ('user', 'assistant')),
  content         text NOT NULL,
  function_calls  jsonb,
  cost            numeric(18, 6) NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversation_messages_conversation ON conversation_messages (conversation_id, id);
