import { createHmac, randomBytes } from 'node:crypto';

/**
 * Webhook signatures as Standard Webhooks (https://www.standardwebhooks.com) defines them, so any
 * of its verifiers (`standardwebhooks`, `svix` and their ports to other languages) checks them:
 * - `webhook-id`: the delivery's id, the same on every attempt (receivers de-duplicate on it);
 * - `webhook-timestamp`: Unix seconds of the attempt;
 * - `webhook-signature`: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed with the
 *   bytes a `whsec_<base64>` secret encodes; several, separated by spaces, while a rotated
 *   secret's predecessor still signs.
 *
 * The project's former scheme (`X-Webhook-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`,
 * keyed with the secret's text as it was shown) is still sent beside it for receivers written
 * for it (`WEBHOOK_LEGACY_SIGNATURE`).
 */

const PREFIX = 'whsec_';

/** `whsec_` + standard base64 (with padding) of 32 random bytes: the key Standard Webhooks' verifiers decode. */
export function newWebhookSecret(): string {
  return `${PREFIX}${randomBytes(32).toString('base64')}`;
}

/** The key bytes of a `whsec_<base64>` secret. */
function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
}

/** One Standard Webhooks signature, `v1,<base64>`. */
export function standardSignature(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', keyOf(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The `webhook-signature` header: one signature per secret (newest first), separated by spaces. */
export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets.map((secret) => standardSignature(secret, id, timestamp, body)).join(' ');
}

/** The former `X-Webhook-Signature`: the HMAC is keyed with the secret's text itself. */
export function legacySignature(secretText: string, timestamp: number, body: string): string {
  return `v1=${createHmac('sha256', secretText).update(`${timestamp}.${body}`).digest('hex')}`;
}
