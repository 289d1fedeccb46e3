import { randomUUID } from 'node:crypto';
import type { DatabasePool } from 'slonik';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { SweepGate } from '../sweeps.js';
import type { ChannelRow } from './repository.js';
import { abandonedInboxes, countFailedAttempt, InboxLost, nextInbound, receiveInbound, releaseInbox, renewInbox, settleInbound, takeInbox, type InboundInput, type InboundRow, type Received } from './inboxStore.js';

/**
 * The channels' inbox: a webhook's message is kept (and its duplicate recognised) before the
 * webhook is acknowledged, then answered in the background by the one process holding the
 * conversation's inbox, oldest first, so a customer's messages are answered in the order they
 * came whichever process received them. A process that stops mid-conversation gives the inbox up
 * (or its lease lapses, if it was killed) and the sweep of any process takes the rest.
 */

/**
 * What became of a message: `done` (its handler marked it so, in the transaction that stored what
 * it did), `skipped` (nothing was stored: the inbox marks it done), `again` (cut short by a stop,
 * or waiting for an earlier attempt's turn: left waiting, and the inbox given up, so whoever holds
 * it next answers it), or `lost` (the inbox's lease lapsed and another process holds it now).
 */
export type Handled = 'done' | 'skipped' | 'again' | 'lost';

/**
 * Messages answered at once by one process, over all its conversations: the rest wait their turn
 * (their inboxes still held and renewed), so a burst of customers leaves database connections for
 * the webhooks that keep new messages.
 */
export const ANSWERING_AT_ONCE = 8;

/** Attempts at a message that fail unexpectedly (not a model's failure: that is answered with a notice) before it is passed over. */
export const MAX_ATTEMPTS = 3;

export interface InboxDeps {
  readonly pool: DatabasePool;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly sweeps?: SweepGate;
  /**
   * Answers one message while `owner` holds its conversation's inbox; marks it done itself, fenced
   * by that lease, when it stores something in the same transaction (else `skipped` has the inbox mark it).
   */
  readonly handle: (message: InboundRow, owner: string) => Promise<Handled>;
  /** Passes over a message that failed `MAX_ATTEMPTS` times (kept, the customer told); marks it done. */
  readonly giveUp: (message: InboundRow, owner: string) => Promise<void>;
  /** @defaultValue 60 s */
  readonly leaseSeconds?: number;
  /** How often abandoned inboxes are looked for. @defaultValue 5 s */
  readonly sweepMs?: number;
}

export function createInbox(deps: InboxDeps) {
  const { pool, clock, logger } = deps;
  const leaseSeconds = deps.leaseSeconds ?? 60;
  let stopping = false;
  const draining = new Set<Promise<void>>();
  const answering = limiter(ANSWERING_AT_ONCE);

  /**
   * What handling a message came to for the inbox: `next` (on to the next message), `release`
   * (the inbox is given up for another process or a later sweep), `lost` (another process holds
   * it now), `failed` (given up after an unexpected failure: not looked at again at once).
   */
  type Step = 'next' | 'release' | 'lost' | 'failed';

  /** Handles one message while `owner` holds its inbox: answered, or passed over after `MAX_ATTEMPTS` unexpected failures. */
  async function step(message: InboundRow, conversationId: string, owner: string): Promise<Step> {
    let outcome: Handled;
    try {
      outcome = message.attempts >= MAX_ATTEMPTS ? await passOver(message, owner) : await answering.run(() => deps.handle(message, owner));
    } catch (error) {
      // Tried again by a later sweep (the inbox given up), a few times; then passed over.
      const attempts = await countFailedAttempt(pool, message.id);
      logger.error({ err: error, conversationId, inboundId: message.id, attempts, final: attempts >= MAX_ATTEMPTS }, 'a channel message could not be answered');
      return 'failed';
    }
    if (outcome === 'lost') return 'lost';
    // Cut short by a stop, or waiting for an earlier attempt's turn: given up for another process (or the next start).
    if (outcome === 'again') return 'release';
    if (outcome === 'skipped' && !(await settled(message.id, owner))) return 'lost';
    return 'next';
  }

  /** @throws what `giveUp` throws but the inbox's loss (the holder passes it over). */
  async function passOver(message: InboundRow, owner: string): Promise<Handled> {
    try {
      await deps.giveUp(message, owner);
      return 'done';
    } catch (error) {
      if (error instanceof InboxLost) return 'lost';
      throw error;
    }
  }

  /** Marks a message nothing was stored for handled, while `owner` holds its inbox. @returns false when it no longer does. */
  async function settled(id: number, owner: string): Promise<boolean> {
    try {
      await settleInbound(pool, id, owner);
      return true;
    } catch (error) {
      if (error instanceof InboxLost) return false;
      throw error;
    }
  }

  /** Answers the conversation's messages in order while `owner` holds its inbox. @returns whether it ended without a failure. */
  async function drain(conversationId: string, owner: string): Promise<boolean> {
    let held = true;
    // Renewals that fail past the lease's end leave the inbox to whoever takes it (the writes
    // of a turn still running here are fenced by the lease, so they cannot land then either).
    let heldUntil = clock.now() + leaseSeconds * 1000;
    const stopRenewing = clock.every((leaseSeconds * 1000) / 3, () => {
      renewInbox(pool, conversationId, owner, leaseSeconds).then(
        (still) => {
          if (!still) held = false;
          else heldUntil = clock.now() + leaseSeconds * 1000;
        },
        (error: unknown) => {
          if (clock.now() >= heldUntil) held = false;
          logger.warn({ err: error, conversationId }, 'could not renew the inbox');
        },
      );
    });
    const release = () => pool.transaction((tx) => releaseInbox(tx, conversationId, owner, true));
    try {
      for (;;) {
        if (!held) return true;
        if (stopping) {
          await release();
          return true;
        }
        const message = await nextInbound(pool, conversationId);
        if (!message) {
          if (await pool.transaction((tx) => releaseInbox(tx, conversationId, owner))) return true;
          continue;
        }
        const next = await step(message, conversationId, owner);
        if (next === 'lost') return true;
        if (next === 'release' || next === 'failed') {
          await release();
          return next === 'release';
        }
      }
    } finally {
      stopRenewing();
    }
  }

  /** The last sweep found as many waiting conversations as it had room for: there may be more. */
  let backlog = false;

  function start(conversationId: string, owner: string): void {
    const run: Promise<void> = drain(conversationId, owner)
      .then(
        (clean) => clean,
        (error: unknown) => {
          logger.error({ err: error, conversationId }, 'a conversation inbox stopped');
          return false;
        },
      )
      .then((clean) => {
        draining.delete(run);
        // Room was made: a backlog (after a restart, say) is taken up as fast as it is answered,
        // not a sweep period at a time; after a failure, the next period's sweep looks again.
        if (clean && backlog && !stopping) void sweepSafely();
      });
    draining.add(run);
  }

  /** Takes up conversations whose messages wait with nobody answering (their process stopped). */
  async function sweep(): Promise<number> {
    if (stopping) return 0;
    let taken = 0;
    // Only as many as this process has room to answer: the other processes take the rest.
    const room = ANSWERING_AT_ONCE - draining.size;
    if (room <= 0) return 0;
    const waiting = await abandonedInboxes(pool, room);
    backlog = waiting.length === room;
    for (const conversationId of waiting) {
      if (stopping || draining.size >= ANSWERING_AT_ONCE) break;
      const owner = randomUUID();
      if (await takeInbox(pool, conversationId, owner, leaseSeconds)) {
        taken++;
        start(conversationId, owner);
      }
    }
    return taken;
  }

  /** Sweeps run one at a time, here: one running and one waiting after it at most. */
  let sweepTail: Promise<unknown> = Promise.resolve();
  let sweepsQueued = 0;
  function serialSweep(): Promise<number> {
    sweepsQueued++;
    const run = sweepTail.then(sweep).finally(() => sweepsQueued--);
    sweepTail = run.catch(() => undefined);
    return run;
  }
  const sweepSafely = (): Promise<unknown> => {
    // One waits already: it will see whatever this one would.
    if (sweepsQueued > 1) return sweepTail;
    return serialSweep().catch((error: unknown) => logger.error({ err: error }, 'abandoned conversation inboxes could not be taken up'));
  };
  let stopSweeps: (() => void) | undefined;

  return {
    /**
     * Keeps a channel's inbound message (once per id) and, when this process takes the
     * conversation's inbox, answers it in the background.
     */
    async receive(channel: ChannelRow, input: InboundInput): Promise<Received> {
      const owner = randomUUID();
      const received = await pool.transaction((tx) => receiveInbound(tx, channel, input, owner, leaseSeconds));
      if (!received.duplicate && received.takesInbox) {
        if (stopping) await pool.transaction((tx) => releaseInbox(tx, received.conversationId, owner, true));
        else start(received.conversationId, owner);
      }
      return received;
    },

    start(): void {
      const every = deps.sweepMs ?? 5_000;
      stopSweeps = deps.sweeps ? deps.sweeps.every('channel-inboxes', every, sweepSafely) : clock.every(every, sweepSafely);
      void sweepSafely();
    },

    sweep: serialSweep,

    /** Resolves once no conversation is being answered, nor looked for, here. */
    async idle(): Promise<void> {
      while (draining.size > 0 || sweepsQueued > 0) await Promise.all([...draining, sweepTail]);
    },

    /** The first step of a stop: no new message is taken up here; conversations being answered give their inbox up after the message at hand. */
    drain(): void {
      stopping = true;
      // Leaves the sweep's turns to the processes that go on.
      stopSweeps?.();
    },

    async stop(): Promise<void> {
      stopping = true;
      stopSweeps?.();
      await this.idle();
    },
  };
}

export type Inbox = ReturnType<typeof createInbox>;

/** Runs at most `size` tasks at once; the others wait in order. */
function limiter(size: number) {
  let running = 0;
  const waiting: Array<() => void> = [];
  return {
    async run<T>(task: () => Promise<T>): Promise<T> {
      if (running < size) running++;
      // The slot passes straight to the next in line, so no newcomer can slip past the limit.
      else await new Promise<void>((resolve) => waiting.push(resolve));
      try {
        return await task();
      } finally {
        const next = waiting.shift();
        if (next) next();
        else running--;
      }
    },
  };
}
