import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Webhook signatures: `X-Webhook-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>">` keyed
 * with the user's webhook secret; `X-Webhook-Timestamp` is Unix seconds. A receiver recomputes the
 * HMAC over the raw body and rejects old timestamps to stop replays.
 */

export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export function signature(secret: string, timestamp: number, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** What a receiver does: constant-time comparison, and a timestamp no older than `toleranceSeconds`. */
export function verifySignature(secret: string, header: string, timestamp: number, body: string, nowSeconds: number, toleranceSeconds = 300): boolean {
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) return false;
  const expected = Buffer.from(signature(secret, timestamp, body));
  const given = Buffer.from(header);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
