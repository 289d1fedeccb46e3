import type { DatabasePool } from 'slonik';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { ChannelError } from './errors.js';
import type { ChannelRow } from './repository.js';
import { claimPart, partFailed, partSent, stillSending, type OutboundRow } from './outboxStore.js';

/**
 * Sends what the outbox holds (outboxStore.ts): every process runs a few sending loops, woken when
 * a message is queued here and every second for retries and for parts a stopped process left
 * mid-send (sent again: a part the channel took just before a kill -9 may reach the customer twice).
 */

/** Waits before attempts 2..6 of a part the channel could not take; after the last it failed. */
export const RETRY_DELAYS_MS = [2_000, 10_000, 60_000, 5 * 60_000, 30 * 60_000] as const;

export interface OutboxDeps {
  readonly pool: DatabasePool;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Sends a part on its channel. @returns the channel's id of the message. @throws ChannelError */
  readonly send: (part: OutboundRow, channel: ChannelRow) => Promise<string>;
  /** Parts sent at once by this process. @defaultValue 4 */
  readonly concurrency?: number;
  /** @defaultValue 1 000 ms */
  readonly pollMs?: number;
}

export function createOutbox(deps: OutboxDeps) {
  const { pool, logger } = deps;
  const concurrency = deps.concurrency ?? 4;
  let loops = 0;
  let again = false;
  let stopped = false;
  const idleWaiters: Array<() => void> = [];

  async function sendOne(part: OutboundRow): Promise<void> {
    // Asked right before the channel is: the claim may have lapsed to another attempt meanwhile.
    const channel = await stillSending(pool, part);
    if (!channel) {
      logger.info({ partId: part.id, conversationId: part.conversation_id, attempt: part.attempts }, 'a channel message was taken over by another attempt before it was sent');
      return;
    }
    let externalId: string;
    try {
      externalId = await deps.send(part, channel);
    } catch (error) {
      const retryable = !(error instanceof ChannelError) || error.retryable;
      const delay = retryable ? RETRY_DELAYS_MS[part.attempts - 1] : undefined;
      const reason = error instanceof Error ? error.message : String(error);
      logger.warn({ err: error, partId: part.id, conversationId: part.conversation_id, attempt: part.attempts, final: delay === undefined }, 'a channel message could not be sent');
      await partFailed(pool, part, reason, delay ?? null);
      return;
    }
    // The channel took it: whatever happens now, it is not sent again by this process.
    try {
      await partSent(pool, part, externalId);
    } catch (error) {
      logger.error({ err: error, partId: part.id, conversationId: part.conversation_id }, 'a sent channel message could not be recorded with its id');
      await partSent(pool, part, null);
    }
  }

  async function loop(): Promise<void> {
    loops++;
    try {
      while (!stopped) {
        again = false;
        const part = await claimPart(pool);
        if (!part) {
          if (again) continue;
          return;
        }
        await sendOne(part);
      }
    } catch (error) {
      logger.error({ err: error }, 'the channel outbox could not be read');
    } finally {
      loops--;
      if (loops === 0) for (const waiter of idleWaiters.splice(0)) waiter();
    }
  }

  function wake(): void {
    if (stopped) return;
    again = true;
    while (loops < concurrency) void loop();
  }

  let stopPolling: (() => void) | undefined;
  return {
    wake,
    start(): void {
      // One loop looks for retries come due; it is joined by others only when a message is queued.
      stopPolling = deps.clock.every(deps.pollMs ?? 1_000, () => {
        if (loops === 0 && !stopped) void loop();
      });
      wake();
    },
    /** Resolves once nothing is being sent here. */
    idle(): Promise<void> {
      return loops === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve));
    },
    /** Sends in flight finish (each has its own time limit); nothing new is taken. */
    async stop(): Promise<void> {
      stopped = true;
      stopPolling?.();
      await this.idle();
    },
  };
}

export type Outbox = ReturnType<typeof createOutbox>;
