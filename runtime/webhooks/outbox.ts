import { sql, type CommonQueryMethods, type DatabasePool } from 'slonik';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { OutboundFetch } from '../net/outbound.js';
import { storableText } from '../store/text.js';
import { datetime } from '../time.js';
import { newWebhookSecret, signature } from './signing.js';

/**
 * Post-call webhooks through a transactional outbox. `enqueueCallEnded` writes the delivery in the
 * transaction that ends the call, so no ended call lacks its notification; the worker sends it,
 * signed, through the outbound guard, and retries with exponential backoff and jitter (about
 * 30 s, 1 min, 2 min, 5 min, 15 min, 1 h, 3 h, 6 h: eight attempts) before giving up. The last
 * attempt's status and body (cut at 4 KB) are kept on the call as `webhook_response`.
 */

/** Delays before attempts 2..8, in milliseconds. */
export const RETRY_DELAYS_MS = [30_000, 60_000, 120_000, 300_000, 900_000, 3_600_000, 10_800_000, 21_600_000] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length;
const RESPONSE_LIMIT = 4096;
const TIMEOUT_MS = 10_000;
const ENDED_ANSWERED = new Set(['completed', 'ended', 'ended_by_customer', 'ended_by_assistant']);

const callForWebhook = z.object({
  id: z.number(),
  user_id: z.number(),
  assistant_id: z.number().nullable(),
  status: z.string(),
  duration: z.number(),
  client_phone_number: z.string().nullable(),
  assistant_phone_number: z.string().nullable(),
  answered_by: z.string().nullable(),
  answered_at: z.string().nullable(),
  variables: z.record(z.unknown()),
  evaluation: z.record(z.unknown()).nullable(),
  transcript: z.string(),
  created_at: z.string(),
  ended_at: z.string().nullable(),
  is_webhook_active: z.boolean().nullable(),
  webhook_url: z.string().nullable(),
  send_webhook_only_on_completed: z.boolean().nullable(),
  include_recording_in_webhook: z.boolean().nullable(),
  input_variables: z.record(z.unknown()).nullable(),
});

/**
 * Queues the `call.ended` notification when the call's assistant wants one. Run it in the
 * transaction that ends the call.
 * @param holdMs delay before the first attempt (the post-call evaluation releases it sooner).
 * @returns whether a delivery was queued.
 */
export async function enqueueCallEnded(db: CommonQueryMethods, callId: number, recordingUrl: string | null = null, holdMs = 0): Promise<boolean> {
  const call = await db.maybeOne(sql.type(callForWebhook)`
    SELECT c.id, c.user_id, c.assistant_id, c.status, c.duration, c.client_phone_number, c.assistant_phone_number, c.answered_by,
      c.answered_at, c.variables, c.evaluation, c.transcript, c.created_at, c.ended_at,
      a.is_webhook_active, a.webhook_url, a.send_webhook_only_on_completed, a.include_recording_in_webhook, a.variables AS input_variables
    FROM calls c LEFT JOIN assistants a ON a.id = c.assistant_id WHERE c.id = ${callId}`);
  if (!call || !call.is_webhook_active || !call.webhook_url) return false;
  if (call.send_webhook_only_on_completed && !(ENDED_ANSWERED.has(call.status) && call.answered_at !== null)) return false;
  const payload = {
    event: 'call.ended',
    id: call.id,
    customer_phone: call.client_phone_number,
    assistant_phone: call.assistant_phone_number,
    duration: call.duration,
    status: call.status,
    answered_by: call.answered_by,
    extracted_variables: call.evaluation ?? {},
    input_variables: { ...(call.input_variables ?? {}), ...call.variables },
    transcript: call.transcript,
    ...(call.include_recording_in_webhook ? { recording_url: recordingUrl } : {}),
    created_at: datetime(call.created_at),
    finished_at: call.ended_at ? datetime(call.ended_at) : null,
  };
  await db.query(sql.unsafe`
    INSERT INTO webhook_deliveries (user_id, assistant_id, call_id, event, url, body, next_attempt_at)
    VALUES (${call.user_id}, ${call.assistant_id}, ${call.id}, 'call.ended', ${call.webhook_url}, ${JSON.stringify(payload)},
      now() + make_interval(secs => ${holdMs / 1000}))`);
  return true;
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

/** The user's signing secret, created on first use. */
export async function webhookSecret(db: CommonQueryMethods, userId: number, rotate = false): Promise<string> {
  const candidate = newWebhookSecret();
  return db.oneFirst(sql.type(z.object({ webhook_secret: z.string() }))`
    UPDATE users SET webhook_secret = CASE WHEN ${rotate} OR webhook_secret IS NULL THEN ${candidate} ELSE webhook_secret END
    WHERE id = ${userId} RETURNING webhook_secret`);
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
});
type Claimed = z.infer<typeof claimed>;

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

/** Sends a delivery again now (same id and body); false when it is not the user's. */
export async function redeliver(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), lease_expires_at = NULL, updated_at = now()
    WHERE id = ${id} AND user_id = ${userId} AND status <> 'delivering'`);
  return result.rowCount > 0;
}

export interface WebhookWorkerOptions {
  readonly pool: DatabasePool;
  readonly fetch: OutboundFetch;
  readonly logger: Logger;
  /** The clock of the poll. */
  readonly clock: Clock;
  /** How often the worker looks for due deliveries. @defaultValue 1 000 ms */
  readonly pollMs?: number;
  /** Delays before attempts 2..8; tests shorten them. */
  readonly retryDelaysMs?: readonly number[];
  /** Wall-clock time of the signatures (receivers check it against theirs). */
  readonly now?: () => number;
  /** Deliveries attempted at once. @defaultValue 4 */
  readonly concurrency?: number;
  /** Called after each attempt (metrics). */
  readonly onAttempt?: (outcome: 'delivered' | 'retry' | 'failed') => void;
}

export function createWebhookWorker(options: WebhookWorkerOptions) {
  const { pool, logger } = options;
  const delays = options.retryDelaysMs ?? RETRY_DELAYS_MS;
  const now = options.now ?? Date.now;
  const concurrency = options.concurrency ?? 4;
  let running = false;
  let stopPoll: (() => void) | undefined;
  const drains = new Set<Promise<void>>();
  const idleWaiters: Array<() => void> = [];

  /** One more drain loop, up to `concurrency`: a receiver that hangs holds up only its own loop. */
  function spawn(): void {
    if (!running || drains.size >= concurrency) return;
    const loop: Promise<void> = drain().finally(() => {
      drains.delete(loop);
      if (drains.size === 0) for (const waiter of idleWaiters.splice(0)) waiter();
    });
    drains.add(loop);
  }

  async function claim(): Promise<Claimed | null> {
    return pool.maybeOne(sql.type(claimed)`
      WITH next AS (
        -- A lapsed lease on the last attempt (or on a redelivery's one) is not tried again.
        SELECT id, status = 'delivering' AND attempts >= ${delays.length} AS lapsed FROM webhook_deliveries w
        WHERE ((status = 'pending' AND next_attempt_at <= now()) OR (status = 'delivering' AND lease_expires_at < now()))
          -- One attempt in flight per user: the loops spread over users instead of all waiting on one receiver.
          AND NOT EXISTS (
            SELECT 1 FROM webhook_deliveries o WHERE o.user_id = w.user_id AND o.status = 'delivering' AND o.lease_expires_at >= now()
          )
        ORDER BY next_attempt_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
      )
      UPDATE webhook_deliveries d SET status = CASE WHEN lapsed THEN 'failed' ELSE 'delivering' END,
        attempts = CASE WHEN lapsed THEN d.attempts ELSE d.attempts + 1 END,
        lease_expires_at = CASE WHEN lapsed THEN NULL ELSE now() + interval '60 seconds' END, updated_at = now(),
        last_error = CASE WHEN lapsed THEN 'The last attempt was never recorded (its worker stopped)' ELSE d.last_error END
      FROM next WHERE d.id = next.id
      RETURNING d.id, d.delivery_id, d.user_id, d.assistant_id, d.call_id, d.url, d.body, d.attempts, d.status`);
  }

  async function send(delivery: Claimed): Promise<void> {
    const secret = await webhookSecret(pool, delivery.user_id);
    const timestamp = Math.floor(now() / 1000);
    let statusCode: number | null = null;
    let response = '';
    let error: string | null = null;
    try {
      const result = await options.fetch(delivery.url, {
        method: 'POST',
        body: delivery.body,
        timeoutMs: TIMEOUT_MS,
        maxBytes: RESPONSE_LIMIT,
        maxRedirects: 0,
        subject: { userId: delivery.user_id, assistantId: delivery.assistant_id, deliveryId: delivery.delivery_id },
        headers: {
          'content-type': 'application/json',
          'user-agent': 'AssistantPlatform-Webhooks/1.0',
          'x-webhook-id': delivery.delivery_id,
          'x-webhook-timestamp': String(timestamp),
          'x-webhook-attempt': String(delivery.attempts),
          'x-webhook-signature': signature(secret, timestamp, delivery.body),
        },
      });
      statusCode = result.status;
      response = storableText(result.body.toString('utf8').slice(0, RESPONSE_LIMIT));
    } catch (cause) {
      error = storableText((cause as Error).message);
    }
    const delivered = statusCode !== null && statusCode >= 200 && statusCode < 300;
    const exhausted = delivery.attempts >= delays.length;
    const jitter = 0.8 + Math.random() * 0.4;
    const delayMs = Math.round((delays[delivery.attempts - 1] ?? delays[delays.length - 1]!) * jitter);
    const status = await pool.transaction(async (tx) => {
      const status = await tx.maybeOneFirst(sql.type(z.object({ status: z.string() }))`
        UPDATE webhook_deliveries SET
          status = CASE WHEN ${delivered} THEN 'delivered' WHEN status = 'cancelled' THEN 'cancelled' WHEN ${exhausted} THEN 'failed' ELSE 'pending' END,
          next_attempt_at = CASE WHEN ${delivered || exhausted} THEN next_attempt_at ELSE now() + ${delayMs} * interval '1 millisecond' END,
          lease_expires_at = NULL, last_status_code = ${statusCode}, last_error = ${error}, last_response = ${response}, updated_at = now()
        WHERE id = ${delivery.id} RETURNING status`);
      if (delivery.call_id !== null) {
        const webhookResponse = statusCode !== null ? { status: statusCode, body: response } : { status: null, error };
        await tx.query(sql.unsafe`UPDATE calls SET webhook_response = ${sql.jsonb(webhookResponse as never)}, updated_at = now() WHERE id = ${delivery.call_id}`);
      }
      return status;
    });
    const outcome = status === 'delivered' ? 'delivered' : status === 'pending' ? 'retry' : 'failed';
    options.onAttempt?.(outcome);
    logger.info({ deliveryId: delivery.delivery_id, attempt: delivery.attempts, statusCode, outcome }, 'webhook attempt');
  }

  async function drain(): Promise<void> {
    while (running) {
      let delivery: Claimed | null;
      try {
        delivery = await claim();
      } catch (error) {
        logger.warn({ err: error }, 'could not claim a webhook delivery');
        return;
      }
      if (!delivery) return;
      // More may be due: another loop looks while this one sends.
      spawn();
      if (delivery.status === 'failed') {
        // Its last attempt's lease ran out unrecorded (the process stopped, or the outcome could not be written).
        options.onAttempt?.('failed');
        logger.warn({ deliveryId: delivery.delivery_id }, 'webhook given up: its last attempt was never recorded');
        continue;
      }
      try {
        await send(delivery);
      } catch (error) {
        // The attempt's outcome could not be recorded (the database went away, or the delivery
        // with it); its lease runs out and the delivery is claimed again.
        logger.warn({ err: error, deliveryId: delivery.delivery_id }, 'could not record a webhook attempt');
        return;
      }
    }
  }

  return {
    start(): void {
      if (running) return;
      running = true;
      spawn();
      stopPoll = options.clock.every(options.pollMs ?? 1000, spawn);
    },
    /** A delivery was queued or redelivered: look now. */
    wake(): void {
      spawn();
    },
    /** Resolves once no drain loop runs: every delivery due when the last one looked was attempted. */
    idle(): Promise<void> {
      return drains.size === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve));
    },
    async stop(): Promise<void> {
      running = false;
      stopPoll?.();
      await Promise.allSettled([...drains]);
    },
  };
}

export type WebhookWorker = ReturnType<typeof createWebhookWorker>;
