-- A charged user message whose reply is still owed. The turn clears it when the reply is saved or
-- the charge refunded; one a stopped process left set is refunded by the engine's sweep.
ALTER TABLE conversation_messages ADD COLUMN reply_pending boolean NOT NULL DEFAULT false;
CREATE INDEX conversation_messages_reply_pending ON conversation_messages (created_at) WHERE reply_pending;
