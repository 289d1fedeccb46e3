import type { DatabasePool } from 'slonik';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { SweepGate } from '../sweeps.js';
import { callCosts } from '../prices.js';
import { chargeEnded, rateOf } from './charges.js';
import { recoverRecording } from './recording.js';
import { closeOrphanedCall, insertOrphanEndEvent, orphanedCalls, touchCalls, type CallHeartbeat, type OrphanedCall } from './repository.js';

/**
 * Which process holds which call, as PostgreSQL knows it. While a process has calls it vouches
 * for them at every heartbeat and records when each was last heard (one statement for all of
 * them). A call no process has vouched for in `orphanAfterMs`, seen so at two sweeps in a row, was
 * left by a process that stopped without ending it (killed, or its machine gone): any process's
 * sweep ends it as of when it was last heard, charges it up to then and queues its webhook. With
 * the default timings that is within a minute of the last heartbeat, and the charge misses at
 * most a heartbeat's interval of talk.
 */

export interface CallPresenceTimings {
  /** How often a process vouches for its live calls. @defaultValue 1 000 ms */
  readonly heartbeatMs: number;
  /** A call nobody vouched for this long is taken for left. @defaultValue 30 000 ms */
  readonly orphanAfterMs: number;
  /** How often the sweep looks for such calls. @defaultValue 10 000 ms */
  readonly sweepMs: number;
}

export const defaultCallPresence = { heartbeatMs: 1_000, orphanAfterMs: 30_000, sweepMs: 10_000 } as const satisfies CallPresenceTimings;

export interface CallPresenceDeps {
  readonly pool: DatabasePool;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly timings: CallPresenceTimings;
  /** Where recordings are written: a left call's recording is finished from what reached the disk. */
  readonly recordingsDir: string;
  /** The signed URL of a call's recording (for the webhook payload). */
  recordingUrl(callId: number): string;
  /** This process, as `calls.holder` names it. */
  readonly holder: string;
  /** This process's calls (live, or with their end still being saved), and when each was last heard. */
  held(): CallHeartbeat[];
  /** The beats were written: the transcripts they carried are now the ones a sweep would keep. */
  written(beats: readonly CallHeartbeat[]): void;
  /** Calls were settled: their webhooks are queued. */
  settled(ids: readonly number[]): void;
  /**
   * Calls this process holds that it could not vouch for: another process's sweep ended them
   * while this one could not vouch for them (a database outage longer than the orphan age), or
   * another process took them over (their media stream joined there).
   */
  lost(ids: readonly number[]): Promise<void>;
  /** Runs after each beat is written (before the next may start): the calls' events and the requests waiting for them. */
  afterBeat?(): Promise<void>;
  /** Runs the periodic sweep once per period across processes; without it, every `sweepMs` here. */
  readonly sweeps?: SweepGate;
}

export function createCallPresence(deps: CallPresenceDeps) {
  const { pool, clock, logger, timings } = deps;
  let heartbeat: unknown;
  /** The heartbeat's statement, while it runs: at most one at a time. */
  let beating: Promise<void> | undefined;
  /** Sweeps running: a stop waits for them before the pool closes. */
  const sweeping = new Set<Promise<unknown>>();
  let stopSweeps: (() => void) | undefined;
  let stopped = false;
  /** Silent calls seen by the last sweep, as last seen then. */
  let sighted = new Map<number, string>();

  /** Ends and charges one left call; false when it ended or was vouched for meanwhile. */
  async function settle(call: OrphanedCall): Promise<boolean> {
    const rate = await rateOf(pool, call.user_id, call.mode, call.type, call.assistant_phone_number);
    const costs = call.answered_ms === null ? { seconds: 0, carrier: 0, total: 0 } : callCosts(rate, Math.max(0, call.end_ms - call.answered_ms));
    const recording = await recoverRecording(deps.recordingsDir, call.id);
    return pool.transaction(async (tx) => {
      if (!(await closeOrphanedCall(tx, call, costs, recording))) return false;
      await insertOrphanEndEvent(tx, call.id);
      await chargeEnded(tx, logger, { userId: call.user_id, callId: call.id, total: costs.total, recordingUrl: recording ? deps.recordingUrl(call.id) : null, holdMs: 0 });
      return true;
    });
  }

  /**
   * Ends the calls stopped processes left open; returns their ids. `all`: every open call other
   * than this process's is left, at once (the database is this process's alone, and it just started).
   */
  function settleOrphans(options: { all?: boolean } = {}): Promise<number[]> {
    const settling = findAndSettle(options);
    const tracked: Promise<unknown> = settling.catch(() => undefined).finally(() => sweeping.delete(tracked));
    sweeping.add(tracked);
    return settling;
  }

  async function findAndSettle(options: { all?: boolean }): Promise<number[]> {
    const own = deps.held().map((beat) => beat.id);
    const silent = await orphanedCalls(pool, options.all ? 0 : timings.orphanAfterMs / 1000, own);
    // Only a call silent at two sweeps in a row, untouched between them: after a database outage
    // longer than the orphan age, the process that holds a call has a sweep's interval to vouch
    // for it again before it is taken for left.
    const confirmed = options.all ? silent : silent.filter((call) => sighted.get(call.id) === call.last_seen);
    sighted = new Map(silent.map((call) => [call.id, call.last_seen]));
    const settled: number[] = [];
    for (const call of confirmed) if (await settle(call)) settled.push(call.id);
    if (settled.length > 0) deps.settled(settled);
    return settled;
  }

  function sweep(options: { all?: boolean } = {}): Promise<unknown> {
    return settleOrphans(options).then(
      (ids) => ids.length > 0 && logger.warn({ calls: ids }, 'ended and charged calls left open by a stopped process'),
      (error: unknown) => logger.error({ err: error }, 'calls left open by a stopped process could not be settled'),
    );
  }

  /**
   * Vouches for the calls held; resolves once that is written (or failed). The beats keep their
   * interval, but one falling due while the last is still being written is skipped: two beats
   * over one database held up (by the ends being saved, under load) would only pile up, and every
   * beat names every call.
   */
  function beat(): Promise<void> | undefined {
    heartbeat = undefined;
    const held = deps.held();
    if (held.length === 0 || stopped) return undefined;
    arm();
    if (beating) return undefined;
    const written: Promise<void> = touchCalls(pool, deps.holder, held)
      .then((vouched) => {
        deps.written(held);
        if (vouched.length === held.length) return undefined;
        const found = new Set(vouched);
        const lost = held.filter((beat) => !found.has(beat.id)).map((beat) => beat.id);
        return lost.length > 0 ? deps.lost(lost) : undefined;
      })
      .catch((error: unknown) => logger.warn({ err: error }, 'live calls could not be vouched for'))
      .then(() => deps.afterBeat?.())
      .catch((error: unknown) => logger.warn({ err: error }, 'the events of live calls, or the requests waiting for them, could not be handled'))
      .finally(() => (beating = undefined));
    beating = written;
    return written;
  }

  /** Starts the heartbeat if it is not running; it stops by itself when the process holds no call. */
  function arm(): void {
    if (heartbeat !== undefined || stopped) return;
    heartbeat = clock.setTimeout(beat, timings.heartbeatMs);
  }

  return {
    /** Sweeps now and then every `sweepMs`; `exclusive`: the database is this process's alone, so the first sweep takes every open call at once. */
    start(options: { exclusive: boolean }): void {
      stopSweeps = deps.sweeps ? deps.sweeps.every('left-calls', timings.sweepMs, () => sweep()) : clock.every(timings.sweepMs, () => sweep());
      void sweep({ all: options.exclusive });
    },
    arm,
    settleOrphans,
    /** Stops the heartbeat and the sweeps; resolves once the beat and sweeps under way have settled (never rejects). */
    stop(): Promise<void> {
      stopped = true;
      stopSweeps?.();
      if (heartbeat !== undefined) clock.clearTimeout(heartbeat);
      heartbeat = undefined;
      return Promise.all([beating, ...sweeping]).then(() => undefined);
    },
  };
}

export type CallPresence = ReturnType<typeof createCallPresence>;
