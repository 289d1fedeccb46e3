import type { DatabasePool } from 'slonik';
import { saveWebhookResponse } from '../calls/repository.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { OutboundFetch } from '../net/outbound.js';
import { storableText } from '../store/text.js';
import { claimDelivery, disableGoneWebhook, GONE_ERROR, recordAttempt, webhookSecrets, type ClaimedDelivery, type WebhookSecrets } from './repository.js';
import { legacySignature, signatureHeader } from './signing.js';

/**
 * The webhook worker: it claims due deliveries from the outbox (callEnded.ts queues them), sends
 * each signed through the outbound guard, and retries with exponential backoff and jitter (about
 * 30 s, 1 min, 2 min, 5 min, 15 min, 1 h, 3 h, 6 h: eight attempts) before giving up. The last
 * attempt's status and body (cut at 4 KB) are kept on the call as `webhook_response`. A receiver
 * answering `410 Gone` is not tried again: the assistant's webhook is disabled (repository.ts).
 * Requests are signed as Standard Webhooks defines (signing.ts). An attempt holds its delivery
 * under a claim with a lease (repository.ts); an attempt that outlived its lease, taken over by
 * another worker meanwhile, records nothing: the receiver may have had the request twice (it
 * de-duplicates by `webhook-id`), the delivery log keeps the newer attempt's outcome.
 */

/** Delays before attempts 2..8, in milliseconds. */
export const RETRY_DELAYS_MS = [30_000, 60_000, 120_000, 300_000, 900_000, 3_600_000, 10_800_000, 21_600_000] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length;
const RESPONSE_LIMIT = 4096;
const TIMEOUT_MS = 10_000;

export interface WebhookWorkerOptions {
  readonly pool: DatabasePool;
  readonly fetch: OutboundFetch;
  readonly logger: Logger;
  /** The clock of the poll, and of each attempt's `webhook-timestamp`. */
  readonly clock: Clock;
  /** How often the worker looks for due deliveries. @defaultValue 1 000 ms */
  readonly pollMs?: number;
  /** Delays before attempts 2..8; tests shorten them. */
  readonly retryDelaysMs?: readonly number[];
  /** Also send the former `X-Webhook-Id`, `-Timestamp` and `-Signature` headers. @defaultValue true */
  readonly legacySignature?: boolean;
  /** Deliveries attempted at once. @defaultValue 4 */
  readonly concurrency?: number;
  /** Called after each attempt whose outcome was recorded (metrics). */
  readonly onAttempt?: (outcome: 'delivered' | 'retry' | 'failed') => void;
  /** Called when an attempt's outcome was dropped: its lease had been taken over (metrics). */
  readonly onLeaseLost?: () => void;
}

/** What a receiver answered: its status and body (cut), or why no answer came. */
interface Answer {
  readonly statusCode: number | null;
  readonly response: string;
  readonly error: string | null;
}

/** The headers that sign one attempt at `timestamp` (Unix seconds). */
function signedHeaders(delivery: ClaimedDelivery, secrets: WebhookSecrets, timestamp: number, legacy: boolean): Record<string, string> {
  const signing = secrets.previous === null ? [secrets.secret] : [secrets.secret, secrets.previous];
  return {
    'webhook-id': delivery.delivery_id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(signing, delivery.delivery_id, timestamp, delivery.body),
    ...(legacy
      ? {
          'x-webhook-id': delivery.delivery_id,
          'x-webhook-timestamp': String(timestamp),
          'x-webhook-signature': legacySignature(secrets.legacy, timestamp, delivery.body),
        }
      : {}),
  };
}

/** POSTs a delivery with `headers`; the receiver's failures come back as an answer, never thrown. */
async function post(fetch: OutboundFetch, delivery: ClaimedDelivery, headers: Record<string, string>): Promise<Answer> {
  try {
    const result = await fetch(delivery.url, {
      method: 'POST',
      body: delivery.body,
      timeoutMs: TIMEOUT_MS,
      maxBytes: RESPONSE_LIMIT,
      maxRedirects: 0,
      subject: { userId: delivery.user_id, assistantId: delivery.assistant_id, deliveryId: delivery.delivery_id },
      headers: {
        'content-type': 'application/json',
        'user-agent': 'AssistantPlatform-Webhooks/1.0',
        'x-webhook-attempt': String(delivery.attempts),
        ...headers,
      },
    });
    return { statusCode: result.status, response: storableText(result.body.toString('utf8').slice(0, RESPONSE_LIMIT)), error: null };
  } catch (cause) {
    return { statusCode: null, response: '', error: storableText((cause as Error).message) };
  }
}

export function createWebhookWorker(options: WebhookWorkerOptions) {
  const { pool, logger } = options;
  const delays = options.retryDelaysMs ?? RETRY_DELAYS_MS;
  const legacy = options.legacySignature ?? true;
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

  async function send(delivery: ClaimedDelivery, claim: string): Promise<void> {
    const secrets = await webhookSecrets(pool, delivery.user_id);
    const timestamp = Math.floor(options.clock.now() / 1000);
    const { statusCode, response, error } = await post(options.fetch, delivery, signedHeaders(delivery, secrets, timestamp, legacy));
    const delivered = statusCode !== null && statusCode >= 200 && statusCode < 300;
    const gone = statusCode === 410;
    const exhausted = gone || delivery.attempts >= delays.length;
    const jitter = 0.8 + Math.random() * 0.4;
    const delayMs = Math.round((delays[delivery.attempts - 1] ?? delays[delays.length - 1]!) * jitter);
    const { status, disabled } = await pool.transaction(async (tx) => {
      const status = await recordAttempt(tx, { id: delivery.id, claim }, { delivered, exhausted, delayMs, statusCode, error: gone ? GONE_ERROR : error, response });
      // Only the attempt that holds the delivery speaks for it: on its call and on the assistant's webhook.
      if (status === null || status === 'taken over') return { status, disabled: false };
      if (delivery.call_id !== null) await saveWebhookResponse(tx, delivery.call_id, statusCode !== null ? { status: statusCode, body: response } : { status: null, error });
      const disabled =
        gone && delivery.assistant_id !== null && (await disableGoneWebhook(tx, { id: delivery.id, userId: delivery.user_id, assistantId: delivery.assistant_id, url: delivery.url }));
      return { status, disabled };
    });
    if (status === 'taken over') {
      options.onLeaseLost?.();
      logger.warn({ deliveryId: delivery.delivery_id, attempt: delivery.attempts, statusCode }, 'the lease on a webhook delivery was taken over; its result is dropped');
      return;
    }
    const outcome = status === 'delivered' ? 'delivered' : status === 'pending' ? 'retry' : 'failed';
    options.onAttempt?.(outcome);
    logger.info({ deliveryId: delivery.delivery_id, attempt: delivery.attempts, statusCode, outcome }, 'webhook attempt');
    if (disabled) logger.warn({ deliveryId: delivery.delivery_id, userId: delivery.user_id, assistantId: delivery.assistant_id }, 'webhook disabled: its receiver answered 410 Gone');
  }

  async function drain(): Promise<void> {
    while (running) {
      let delivery: ClaimedDelivery | null;
      try {
        delivery = await claimDelivery(pool, delays.length);
      } catch (error) {
        logger.warn({ err: error }, 'could not claim a webhook delivery');
        return;
      }
      if (!delivery) return;
      // More may be due: another loop looks while this one sends.
      spawn();
      if (delivery.status === 'failed' || delivery.claim === null) {
        // Its last attempt's lease ran out unrecorded (the process stopped, or the outcome could not be written).
        options.onAttempt?.('failed');
        logger.warn({ deliveryId: delivery.delivery_id }, 'webhook given up: its last attempt was never recorded');
        continue;
      }
      try {
        await send(delivery, delivery.claim);
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
