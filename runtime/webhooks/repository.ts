import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { storableJson } from '../store/text.js';
import { newWebhookSecret } from './signing.js';

/**
 * Every statement about webhook deliveries (the outbox of `call.ended` notifications) and the
 * users' signing secrets. The worker (worker.ts) claims and records attempts; the call's end
 * (callEnded.ts), the post-call evaluation and the assistants' settings queue, release, cancel
 * or retarget deliveries in their own transactions.
 */

/** Queues a call's `call.ended` delivery; `body` is the JSON sent, first attempted after `holdMs`. */
export async function insertCallEndedDelivery(
  db: CommonQueryMethods,
  delivery: { userId: number; assistantId: number | null; callId: number; url: string; body: string; holdMs: number },
): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO webhook_deliveries (user_id, assistant_id, call_id, event, url, body, next_attempt_at)
    VALUES (${delivery.userId}, ${delivery.assistantId}, ${delivery.callId}, 'call.ended', ${delivery.url}, ${delivery.body},
      now() + make_interval(secs => ${delivery.holdMs / 1000}))`);
}

/**
 * Disabling a webhook stops what has not been delivered yet: waiting deliveries, and one whose
 * attempt is in flight, which stays cancelled unless that attempt succeeds (it is never retried).
 */
export async function cancelPendingDeliveries(db: CommonQueryMethods, userId: number, assistantId: number): Promise<number> {
  const result = await db.query(sql.unsafe`
    UPDATE webhook_deliveries SET status = 'cancelled', lease_expires_at = NULL, updated_at = now()
    WHERE user_id = ${userId} AND assistant_id = ${assistantId} AND status IN ('pending', 'delivering')`);
  return result.rowCount;
}

/** A changed webhook URL: what has not been delivered yet goes to the new one from its next attempt. */
export async function retargetPendingDeliveries(db: CommonQueryMethods, userId: number, assistantId: number, url: string): Promise<number> {
  const result = await db.query(sql.unsafe`
    UPDATE webhook_deliveries SET url = ${url}, updated_at = now()
    WHERE user_id = ${userId} AND assistant_id = ${assistantId} AND status IN ('pending', 'delivering') AND url <> ${url}`);
  return result.rowCount;
}

export const secretsRow = z.object({
  /** The secret that signs now, `whsec_<base64>`. */
  secret: z.string(),
  /** The text that keys the former `X-Webhook-Signature`: the secret as first shown (before it was rewritten in standard base64). */
  legacy: z.string(),
  /** The secret a rotation replaced, while it still signs; null otherwise. */
  previous: z.string().nullable(),
  /** When `previous` stops signing (`<iso_timestamp>`); null when there is none. */
  previous_expires_at: z.string().nullable(),
});
export type WebhookSecrets = z.infer<typeof secretsRow>;

const secretsColumns = sql.fragment`webhook_secret AS secret, coalesce(webhook_secret_legacy, webhook_secret) AS legacy,
  CASE WHEN webhook_secret_previous_until > now() THEN webhook_secret_previous END AS previous,
  CASE WHEN webhook_secret_previous_until > now() THEN webhook_secret_previous_until END AS previous_expires_at`;

/** The user's signing secrets, the current one created on first use. */
export async function webhookSecrets(db: CommonQueryMethods, userId: number): Promise<WebhookSecrets> {
  return db.one(sql.type(secretsRow)`
    UPDATE users SET webhook_secret = coalesce(webhook_secret, ${newWebhookSecret()})
    WHERE id = ${userId} RETURNING ${secretsColumns}`);
}

/**
 * Replaces the user's secret; the one replaced goes on signing for `overlapMs` (a rotation during
 * an overlap ends the older secret's at once: two secrets sign at most).
 */
export async function rotateWebhookSecret(db: CommonQueryMethods, userId: number, overlapMs: number): Promise<WebhookSecrets> {
  return db.one(sql.type(secretsRow)`
    UPDATE users SET webhook_secret = ${newWebhookSecret()}, webhook_secret_legacy = NULL,
      webhook_secret_previous = CASE WHEN ${overlapMs} > 0 THEN webhook_secret END,
      webhook_secret_previous_until = CASE WHEN ${overlapMs} > 0 AND webhook_secret IS NOT NULL THEN now() + ${overlapMs} * interval '1 millisecond' END
    WHERE id = ${userId} RETURNING ${secretsColumns}`);
}

export const deliveryRow = z.object({
  id: z.number(),
  delivery_id: z.string(),
  call_id: z.number().nullable(),
  event: z.string(),
  url: z.string(),
  status: z.enum(['pending', 'delivering', 'delivered', 'failed', 'cancelled']),
  attempts: z.number(),
  next_attempt_at: z.string(),
  last_status_code: z.number().nullable(),
  last_error: z.string().nullable(),
  last_response: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

export async function listDeliveries(db: CommonQueryMethods, userId: number, filters: { callId?: number; status?: string }) {
  const conditions = [sql.fragment`user_id = ${userId}`];
  if (filters.callId !== undefined) conditions.push(sql.fragment`call_id = ${filters.callId}`);
  if (filters.status) conditions.push(sql.fragment`status = ${filters.status}`);
  return db.any(sql.type(deliveryRow)`
    SELECT id, delivery_id, call_id, event, url, status, attempts, next_attempt_at, last_status_code, last_error, last_response, created_at, updated_at
    FROM webhook_deliveries WHERE ${sql.join(conditions, sql.fragment` AND `)} ORDER BY id DESC LIMIT 100`);
}

/**
 * Sends a delivery again now (same id and body); false when it is not the user's. An attempt still
 * in flight (on a delivery cancelled meanwhile) loses its claim: its outcome is not recorded.
 */
export async function redeliver(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), lease_expires_at = NULL, claim = NULL, updated_at = now()
    WHERE id = ${id} AND user_id = ${userId} AND status <> 'delivering'`);
  return result.rowCount > 0;
}

/**
 * Gives a call's held `call.ended` delivery (not attempted yet) the post-call evaluation as its
 * `extracted_variables`, and makes it due now.
 */
export async function releaseWithEvaluation(db: CommonQueryMethods, callId: number, evaluation: Record<string, unknown>): Promise<void> {
  await db.query(sql.unsafe`
          UPDATE webhook_deliveries SET body = jsonb_set(body::jsonb, '{extracted_variables}', ${sql.jsonb(storableJson(evaluation) as never)})::text, next_attempt_at = now()
          WHERE call_id = ${callId} AND status = 'pending' AND attempts = 0`);
}

const claimed = z.object({
  id: z.number(),
  delivery_id: z.string(),
  user_id: z.number(),
  assistant_id: z.number().nullable(),
  call_id: z.number().nullable(),
  url: z.string(),
  body: z.string(),
  attempts: z.number(),
  status: z.enum(['delivering', 'failed']),
  /** This attempt's own id: its outcome is recorded only while the delivery carries it (null when given up). */
  claim: z.string().nullable(),
});
export type ClaimedDelivery = z.infer<typeof claimed>;

/**
 * How long an attempt holds its delivery. Not renewed: an attempt is bounded well within it (the
 * receiver's 10 s limit, then one short transaction); one that outlives it all the same finds its
 * claim taken over and records nothing.
 */
export const DELIVERY_LEASE_SECONDS = 60;

/**
 * Takes the next delivery due (a waiting one, or one whose attempt's lease ran out) with a lease
 * of `DELIVERY_LEASE_SECONDS` under a new claim, and counts the attempt; at most one in flight per
 * user. One whose last attempt (`maxAttempts`) lapsed unrecorded comes back `failed` instead (with
 * no claim), and is not tried again.
 */
export async function claimDelivery(db: CommonQueryMethods, maxAttempts: number): Promise<ClaimedDelivery | null> {
  return db.maybeOne(sql.type(claimed)`
      WITH next AS (
        -- A lapsed lease on the last attempt (or on a redelivery's one) is not tried again.
        SELECT id, status = 'delivering' AND attempts >= ${maxAttempts} AS lapsed FROM webhook_deliveries w
        WHERE ((status = 'pending' AND next_attempt_at <= now()) OR (status = 'delivering' AND lease_expires_at < now()))
          -- One attempt in flight per user: the loops spread over users instead of all waiting on one receiver.
          AND NOT EXISTS (
            SELECT 1 FROM webhook_deliveries o WHERE o.user_id = w.user_id AND o.status = 'delivering' AND o.lease_expires_at >= now()
          )
        ORDER BY next_attempt_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
      )
      UPDATE webhook_deliveries d SET status = CASE WHEN lapsed THEN 'failed' ELSE 'delivering' END,
        attempts = CASE WHEN lapsed THEN d.attempts ELSE d.attempts + 1 END,
        lease_expires_at = CASE WHEN lapsed THEN NULL ELSE now() + ${DELIVERY_LEASE_SECONDS} * interval '1 second' END,
        claim = CASE WHEN lapsed THEN NULL ELSE gen_random_uuid() END, updated_at = now(),
        last_error = CASE WHEN lapsed THEN 'The last attempt was never recorded (its worker stopped)' ELSE d.last_error END
      FROM next WHERE d.id = next.id
      RETURNING d.id, d.delivery_id, d.user_id, d.assistant_id, d.call_id, d.url, d.body, d.attempts, d.status, d.claim::text AS claim`);
}

export interface DeliveryAttempt {
  /** The receiver answered 2xx. */
  readonly delivered: boolean;
  /** It was the last attempt allowed. */
  readonly exhausted: boolean;
  /** Before the next attempt, when there is one. */
  readonly delayMs: number;
  /** The receiver's HTTP status; null when none came (`error` says why). */
  readonly statusCode: number | null;
  readonly error: string | null;
  /** The receiver's body, cut. */
  readonly response: string;
}

/**
 * Records an attempt's outcome and ends its lease, while the delivery still carries the attempt's
 * claim: delivered, waiting for the next attempt, failed, or cancelled (a delivery cancelled while
 * its attempt was in flight stays cancelled unless the attempt succeeded).
 * @returns the delivery's status now; `taken over` when it carries another claim (or none: given
 * up, redelivered) and nothing was recorded; null when it is gone.
 */
export async function recordAttempt(
  db: CommonQueryMethods,
  delivery: { id: number; claim: string },
  attempt: DeliveryAttempt,
): Promise<z.infer<typeof deliveryRow>['status'] | 'taken over' | null> {
  const status = await db.maybeOneFirst(sql.type(z.object({ status: deliveryRow.shape.status }))`
        UPDATE webhook_deliveries SET
          status = CASE WHEN ${attempt.delivered} THEN 'delivered' WHEN status = 'cancelled' THEN 'cancelled' WHEN ${attempt.exhausted} THEN 'failed' ELSE 'pending' END,
          next_attempt_at = CASE WHEN ${attempt.delivered || attempt.exhausted} THEN next_attempt_at ELSE now() + ${attempt.delayMs} * interval '1 millisecond' END,
          lease_expires_at = NULL, last_status_code = ${attempt.statusCode}, last_error = ${attempt.error}, last_response = ${attempt.response}, updated_at = now()
        WHERE id = ${delivery.id} AND claim = ${delivery.claim}::uuid RETURNING status`);
  if (status !== null) return status;
  return (await db.exists(sql.unsafe`SELECT 1 FROM webhook_deliveries WHERE id = ${delivery.id}`)) ? 'taken over' : null;
}

/** What the delivery log says of deliveries stopped by a receiver's `410 Gone`. */
export const GONE_ERROR = "The receiver answered 410 Gone: the assistant's webhook was disabled.";
export const CANCELLED_FOR_GONE = "Not sent: the assistant's webhook was disabled after its receiver answered 410 Gone.";

/**
 * A receiver answered `410 Gone`: the assistant's webhook is disabled as the disable operation
 * does (`is_webhook_active` false, `webhook_url` null), and its deliveries still waiting are
 * cancelled, each saying why. Nothing happens when the assistant's webhook has moved to another
 * URL (or was turned off) since the attempt began: the 410 speaks for the old receiver only.
 * @returns whether the webhook was disabled.
 */
export async function disableGoneWebhook(db: CommonQueryMethods, delivery: { id: number; userId: number; assistantId: number; url: string }): Promise<boolean> {
  const disabled = await db.query(sql.unsafe`
    UPDATE assistants SET is_webhook_active = false, webhook_url = NULL, updated_at = now()
    WHERE id = ${delivery.assistantId} AND user_id = ${delivery.userId} AND is_webhook_active AND webhook_url = ${delivery.url}`);
  if (disabled.rowCount === 0) return false;
  await db.query(sql.unsafe`
    UPDATE webhook_deliveries SET status = 'cancelled', lease_expires_at = NULL, last_error = ${CANCELLED_FOR_GONE}, updated_at = now()
    WHERE user_id = ${delivery.userId} AND assistant_id = ${delivery.assistantId} AND status IN ('pending', 'delivering') AND id <> ${delivery.id}`);
  return true;
}
