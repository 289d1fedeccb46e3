import { relative } from 'node:path';
import type { DatabasePool } from 'slonik';
import { sleep, type Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { isoTimestamp } from '../time.js';
import type { CallStatus } from '../../schemas/calls.js';
import type { CallEnd } from '../voice/spec.js';
import { chargeEnded } from './charges.js';
import type { CallEventRecord } from './events.js';
import type { CallCosts } from './metering.js';
import type { WavRecorder } from './recording.js';
import type { LiveCall } from './registry.js';
import { endCall, insertCallEvents } from './repository.js';

/** What writing a call's end needs besides the call. */
export interface EndWriting {
  readonly pool: DatabasePool;
  readonly logger: Logger;
  readonly recordingsDir: string;
  recordingUrl(callId: number): string;
}

/** Waits before each new attempt to save a call's end; then a minute, for as long as the process runs. */
const END_SAVE_RETRY_MS = [1_000, 2_000, 5_000, 10_000, 30_000, 60_000];

/**
 * Runs `save` (a call's end) until the database takes it, waiting 1 s, 2 s, 5 s ... a minute
 * between attempts (by the clock; `retries` in tests), given up only once the process stops:
 * the orphan sweep, the only other way a call ends, knows nothing of its transcript, recording
 * or evaluation.
 */
export async function untilSaved<T>(
  options: { clock: Clock; logger: Logger; callId: number; retries?: readonly number[]; stopped(): boolean; signal: AbortSignal },
  save: () => Promise<T>,
): Promise<T> {
  const retries = options.retries ?? END_SAVE_RETRY_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return await save();
    } catch (error) {
      if (options.stopped()) throw error;
      const delay = retries[Math.min(attempt, retries.length - 1)]!;
      options.logger[attempt < retries.length ? 'warn' : 'error']({ err: error, callId: options.callId, attempt: attempt + 1 }, 'the end of the call could not be saved; trying again');
      await sleep(options.clock, delay, options.signal);
    }
  }
}

/** A webhook waits this long at most for the post-call evaluation. */
const EVALUATION_HOLD_MS = 10 * 60_000;

/** Finishes a call's recording; returns its path relative to the recordings directory, or null (none, or it failed: logged). */
export async function finishRecording(deps: EndWriting, callId: number, recorder: WavRecorder | undefined): Promise<string | null> {
  if (!recorder) return null;
  try {
    await recorder.close();
    return relative(deps.recordingsDir, recorder.path);
  } catch (error) {
    deps.logger.error({ err: error, callId }, 'the recording could not be finished');
    return null;
  }
}

/**
 * One attempt at writing an ended call in one transaction, by `holder`: its row, the events no
 * heartbeat wrote (its end among them) and its charge with its webhook (its hold on the balance
 * released). Resolves with the events written; nothing is written (`wrote` false) when the call
 * had already ended (a sweep took it) or another process holds it now (its stream joined there).
 */
export function writeEnd(
  deps: EndWriting,
  call: LiveCall,
  end: CallEnd,
  { holder, costs, recordingPath, evaluate }: { holder: string; costs: CallCosts; recordingPath: string | null; evaluate: boolean },
): Promise<{ wrote: boolean; events: CallEventRecord[] }> {
  const { logger } = deps;
  const id = call.session.spec.callId;
  return deps.pool.transaction(async (tx) => {
    const wrote = await endCall(tx, id, holder, {
      recordingPath,
      evaluationPending: evaluate,
      carrierCost: costs.carrier,
      totalCost: costs.total,
      status: end.status as CallStatus,
      transcript: end.transcript,
      duration: end.durationSeconds,
      answeredBy: end.answeredBy,
      answeredAt: end.answeredAt === null ? null : isoTimestamp(end.answeredAt),
      endedAt: isoTimestamp(end.endedAt),
    });
    if (!wrote) {
      logger.warn({ callId: id }, 'the call had already been ended (by a sweep, as of when it was last heard) or is held by another process; this end is not saved');
      return { wrote: false, events: [] };
    }
    const events = call.events.unwritten();
    await insertCallEvents(tx, events);
    await chargeEnded(tx, logger, { userId: call.ownerId, callId: id, total: costs.total, recordingUrl: recordingPath ? deps.recordingUrl(id) : null, holdMs: evaluate ? EVALUATION_HOLD_MS : 0 });
    return { wrote: true, events };
  });
}
