-- Standard Webhooks signing (runtime/webhooks/signing.ts): a secret is `whsec_` + standard base64
-- of its key bytes, and a rotated secret's predecessor goes on signing for an overlap.
--
-- Secrets issued before were `whsec_` + unpadded base64url of 32 random bytes, used as HMAC keys
-- in their text form. They are rewritten in standard base64 (the same 32 key bytes, now also what
-- Standard Webhooks' verifiers decode), and the text the owner was shown is kept in
-- `webhook_secret_legacy`: the former `X-Webhook-Signature` header stays keyed with it, so a
-- receiver verifying that header goes on working until its owner moves or rotates.
ALTER TABLE users
  ADD COLUMN webhook_secret_legacy text,
  -- The secret a rotation replaced; it signs deliveries too until `webhook_secret_previous_until`.
  ADD COLUMN webhook_secret_previous text,
  ADD COLUMN webhook_secret_previous_until timestamptz;

UPDATE users SET
  webhook_secret_legacy = webhook_secret,
  webhook_secret = 'whsec_' || encode(decode(
    translate(substr(webhook_secret, 7), '-_', '+/') || repeat('=', (4 - length(substr(webhook_secret, 7)) % 4) % 4),
    'base64'), 'base64')
WHERE webhook_secret LIKE 'whsec\_%' AND substr(webhook_secret, 7) ~ '^[A-Za-z0-9_-]+$';
