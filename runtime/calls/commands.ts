import type { DatabasePool } from 'slonik';
import type { Logger } from '../logger.js';
import { listenTo, type Listener } from '../store/notifications.js';
import { CALL_COMMANDS_CHANNEL, takeCallCommands } from './repository.js';

/**
 * Requests to the calls this process holds, made on any process (a hang-up by the call's owner):
 * a row per call in `call_commands`, taken here when PostgreSQL notifies that one was made for a
 * call held here, when the notification connection is (again) listening, and at every heartbeat
 * (so a lost notification delays a request by a heartbeat, and loses nothing).
 */
export interface CallCommandsDeps {
  readonly pool: DatabasePool;
  /** Without it, requests are taken at the heartbeats only. */
  readonly databaseUrl: string | undefined;
  readonly logger: Logger;
  /** The calls this process holds live. */
  held(): number[];
  /** Carries out a hang-up of a call held here (gone meanwhile: nothing to do). */
  hangUp(callId: number): void;
}

export function createCallCommands(deps: CallCommandsDeps) {
  /** Takes and carries out the requests waiting for these calls; a failure is logged (the next heartbeat tries again). */
  async function take(ids: readonly number[]): Promise<void> {
    if (ids.length === 0) return;
    try {
      for (const command of await takeCallCommands(deps.pool, ids)) if (command.command === 'hangup') deps.hangUp(command.call_id);
    } catch (error) {
      deps.logger.warn({ err: error }, 'requests to live calls could not be taken');
    }
  }

  const listener: Listener | undefined = deps.databaseUrl
    ? listenTo(deps.databaseUrl, CALL_COMMANDS_CHANNEL, {
        notified: (payload) => {
          const id = Number(payload);
          if (deps.held().includes(id)) void take([id]);
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
