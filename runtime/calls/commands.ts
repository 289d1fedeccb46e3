import type { DatabasePool } from 'slonik';
import type { Logger } from '../logger.js';
import { listenTo, type Listener } from '../store/notifications.js';
import { CALL_COMMANDS_CHANNEL, handedOver, takeCallCommands, type CallCommand } from './holding.js';

/**
 * Requests to the calls this process holds, made on any process (a hang-up by the call's owner, a
 * carrier's status callback that landed elsewhere): rows in `call_commands`, taken in order here
 * when PostgreSQL notifies that one was made for a call held here, when the notification
 * connection is (again) listening, and at every heartbeat (so a lost notification delays a
 * request by a heartbeat, and loses nothing). Only the process `calls.holder` names takes them:
 * one whose call was taken over by the process its stream joined learns so here, at once.
 */
export interface CallCommandsDeps {
  readonly pool: DatabasePool;
  /** Without it, requests are taken at the heartbeats only. */
  readonly databaseUrl: string | undefined;
  readonly logger: Logger;
  /** This process, as `calls.holder` names it. */
  readonly holder: string;
  /** The calls this process holds live. */
  held(): number[];
  /** Whether this process holds `callId` live (every process hears every notification: this is asked of each). */
  holds(callId: number): boolean;
  /** Carries out a request to a call held here (gone meanwhile: nothing to do). */
  carryOut(callId: number, command: CallCommand): void;
  /** Calls held here until now that another process took over (their stream joined there). */
  released(callIds: readonly number[]): void;
}

export function createCallCommands(deps: CallCommandsDeps) {
  /** Takes and carries out the requests waiting for these calls; a failure is logged (the next heartbeat tries again). */
  async function take(ids: readonly number[]): Promise<void> {
    if (ids.length === 0) return;
    try {
      for (const { callId, ...command } of await takeCallCommands(deps.pool, deps.holder, ids)) deps.carryOut(callId, command as CallCommand);
    } catch (error) {
      deps.logger.warn({ err: error }, 'requests to live calls could not be taken');
    }
  }

  /** A call held here was notified about: taken over by another process, or a request for it. */
  async function notified(id: number): Promise<void> {
    try {
      const moved = await handedOver(deps.pool, deps.holder, [id]);
      if (moved.length > 0) return deps.released(moved);
    } catch (error) {
      deps.logger.warn({ err: error, callId: id }, 'whether a live call was taken over could not be read');
    }
    await take([id]);
  }

  const listener: Listener | undefined = deps.databaseUrl
    ? listenTo(deps.databaseUrl, CALL_COMMANDS_CHANNEL, {
        notified: (payload) => {
          const id = Number(payload);
          if (deps.holds(id)) void notified(id);
        },
        listening: () => void take(deps.held()),
      }, deps.logger)
    : undefined;

  return {
    /** At a heartbeat: the requests for every call held. */
    takeAll: () => take(deps.held()),
    close: async () => listener?.close(),
  };
}

export type CallCommands = ReturnType<typeof createCallCommands>;
