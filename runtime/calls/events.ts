import type { DatabasePool } from 'slonik';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { isoTimestamp } from '../time.js';
import type { SessionHooks } from '../voice/spec.js';
import { insertCallEvents } from './repository.js';

/**
 * A call's events as its owner reads them (`GET /user/calls/{id}/events`), kept in memory by the
 * process holding the call and written in batches (with the heartbeat, the rest with the end), so
 * recording one is a push onto an array: nothing on the 20 ms audio path waits for the database.
 *
 * Types and their `data`:
 * - `start`: `{type, mode}` (the call was created; `offset_ms` 0).
 * - `status`: `{status}`, every status the call enters.
 * - `turn`: `{role: "user" | "assistant", text, start_offset_ms, end_offset_ms}`: what the caller
 *   said (from their first speech to their last) and what the caller heard of the agent (from its
 *   first audio to the end of the response, cut where an interruption cut it).
 * - `interruption`: `{state: "paused" | "resumed" | "stood"}`: the agent paused for the caller's
 *   sound, then went on (no interruption after all) or gave the turn up.
 * - `tool_call`: `{name, duration_ms, ok, error?}`. Never the arguments or the result: they may
 *   carry the caller's personal data, and the transcript says what the agent made of them.
 * - `latency`: `{metric: "voice_to_voice" | "llm_first_token", ms, provider?}`.
 * - `end`: `{status, duration, reason}`; `reason` is `hangup` (the owner's request), `shutdown`
 *   (the server stopped), `orphaned` (its process was lost; written by the sweep), or null.
 */

export type CallEventType = 'start' | 'status' | 'turn' | 'interruption' | 'tool_call' | 'latency' | 'end';

export interface CallEventRecord {
  readonly callId: number;
  readonly seq: number;
  readonly type: CallEventType;
  /** ISO timestamp. */
  readonly at: string;
  readonly offsetMs: number;
  readonly data: Record<string, unknown>;
}

/**
 * At most this many events per call are kept: a call lasts 20 minutes at most (`max_duration`),
 * which is a few hundred turns; beyond it a runaway loop would only fill the table.
 */
export const MAX_EVENTS_PER_CALL = 5_000;

export class CallEventLog {
  /** Events not yet known to be written, oldest first. */
  private pending: CallEventRecord[] = [];
  private dropped = false;

  /**
   * @param startedAt the call's start by the calls' clock: offsets count from it.
   * @param next the seq of its first event here (the ones before are written: the call's `start`,
   *   or what the process holding it before wrote).
   */
  constructor(
    readonly callId: number,
    readonly startedAt: number,
    private readonly logger: Logger,
    private next = 0,
  ) {}

  /** Records an event at `at` (by the calls' clock). */
  record(type: CallEventType, at: number, data: Record<string, unknown>): void {
    if (this.next >= MAX_EVENTS_PER_CALL) {
      if (!this.dropped) this.logger.warn({ callId: this.callId, limit: MAX_EVENTS_PER_CALL }, 'call events beyond the limit are not kept');
      this.dropped = true;
      return;
    }
    this.pending.push({ callId: this.callId, seq: this.next++, type, at: isoTimestamp(at), offsetMs: this.offset(at), data });
  }

  /** Milliseconds from the call's start to `at`. */
  offset(at: number): number {
    return Math.max(0, Math.round(at - this.startedAt));
  }

  /** What is still to be written (a copy): a heartbeat writes it and then calls `written`. */
  unwritten(): CallEventRecord[] {
    return this.pending.slice();
  }

  /** `events` (taken by `unwritten`) are in the database: they are no longer kept here. */
  written(events: readonly CallEventRecord[]): void {
    if (events.length === 0) return;
    const last = events[events.length - 1]!.seq;
    this.pending = this.pending.filter((event) => event.seq > last);
  }
}

/** Statuses of a live call that are events of their own (the final one is the `end` event's). */
const LIVE_STATUSES: ReadonlySet<string> = new Set(['ringing', 'in-progress']);

/** The session's reports (the hooks it already calls) as events of the call, by the calls' clock. */
export function eventHooks(events: CallEventLog, clock: Clock) {
  const interruption = (state: 'paused' | 'resumed' | 'stood') => events.record('interruption', clock.now(), { state });
  return {
    status: (status: string, at: number) => {
      if (LIVE_STATUSES.has(status)) events.record('status', at, { status });
    },
    voiceToVoice: (ms: number) => events.record('latency', clock.now(), { metric: 'voice_to_voice', ms: Math.round(ms) }),
    interruption: () => interruption('stood'),
    resumed: () => interruption('resumed'),
    paused: () => interruption('paused'),
    said: (turn) => events.record('turn', turn.endedAt, { role: turn.role, text: turn.text, start_offset_ms: events.offset(turn.startedAt), end_offset_ms: events.offset(turn.endedAt) }),
    toolCall: (call) => events.record('tool_call', clock.now(), { name: call.name, duration_ms: Math.round(call.ms), ok: call.error === undefined, ...(call.error === undefined ? {} : { error: call.error }) }),
    firstByte: (_kind: 'llm', provider: string, ms: number) => events.record('latency', clock.now(), { metric: 'llm_first_token', ms: Math.round(ms), provider }),
  } satisfies Partial<SessionHooks> & { said: NonNullable<SessionHooks['said']>; toolCall: NonNullable<SessionHooks['toolCall']> };
}

/**
 * Writes what these calls recorded since their last batch, in one statement; on failure it stays
 * to be written with the next batch (or the call's end).
 */
export async function writeEvents(pool: DatabasePool, logs: readonly CallEventLog[]): Promise<void> {
  const batches = logs.map((log) => ({ log, events: log.unwritten() })).filter((batch) => batch.events.length > 0);
  if (batches.length === 0) return;
  await insertCallEvents(pool, batches.flatMap((batch) => batch.events));
  for (const batch of batches) batch.log.written(batch.events);
}
