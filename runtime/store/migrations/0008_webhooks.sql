-- Webhook signing secrets and the transactional outbox of webhook deliveries.

ALTER TABLE users ADD COLUMN webhook_secret text;

-- A delivery is written in the transaction that ends its call; workers claim due rows with
-- FOR UPDATE SKIP LOCKED under a lease. `body` is stored as sent, so retries carry the same bytes
-- and `delivery_id` (X-Webhook-Id) stays the same across attempts.
CREATE TABLE webhook_deliveries (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id      uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  user_id          bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  assistant_id     bigint REFERENCES assistants (id) ON DELETE SET NULL,
  call_id          bigint REFERENCES calls (id) ON DELETE CASCADE,
  event            text NOT NULL,
  url              text NOT NULL,
  body             text NOT NULL,
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivering', 'delivered', 'failed', 'cancelled')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  lease_expires_at timestamptz,
  last_status_code integer,
  last_error       text,
  last_response    text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'delivering');
CREATE INDEX webhook_deliveries_user ON webhook_deliveries (user_id, id DESC);
CREATE INDEX webhook_deliveries_call ON webhook_deliveries (call_id);
