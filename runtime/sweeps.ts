import { sql, type DatabasePool } from 'slonik';
import { z } from 'zod';
import type { Clock } from './clock.js';
import type { Logger } from './logger.js';

/**
 * Periodic sweeps of shared state run once per period across every process on one database,
 * whatever the number of processes or machines: each process ticks on its own clock, and the tick
 * that moves the sweep's `next_at` on (one statement, atomic) runs it; the others skip that
 * period. A tick whose clock is far behind the row's `next_at` (more than a period: the row was
 * written by a clock ahead of it, or the clock was set back) also takes it, so a sweep can run
 * twice in a period but is never stopped for good. `now` is the injected clock, so a manual clock
 * moves sweeps as it moves every other timer.
 */
export interface SweepGate {
  /** Runs `task` every `periodMs` when this process wins that period; see above. Returns the stop. */
  every(name: string, periodMs: number, task: () => Promise<unknown>): () => void;
  /** Whether this tick of `name` is this process's to run (moves `next_at` on when it is). */
  due(name: string, periodMs: number): Promise<boolean>;
}

export function createSweepGate(pool: DatabasePool, clock: Clock, logger: Logger): SweepGate {
  async function due(name: string, periodMs: number): Promise<boolean> {
    const now = new Date(clock.now()).toISOString();
    const next = new Date(clock.now() + periodMs).toISOString();
    const won = await pool.maybeOneFirst(sql.type(z.object({ name: z.string() }))`
      INSERT INTO sweeps (name, next_at) VALUES (${name}, ${next}::timestamptz)
      ON CONFLICT (name) DO UPDATE SET next_at = excluded.next_at
        WHERE sweeps.next_at <= ${now}::timestamptz OR sweeps.next_at > excluded.next_at
      RETURNING name`);
    return won !== null;
  }
  return {
    due,
    every(name, periodMs, task) {
      return clock.every(periodMs, () =>
        due(name, periodMs).then(
          (won) => (won ? task() : undefined),
          (error: unknown) => logger.warn({ err: error, sweep: name }, 'a sweep could not be scheduled'),
        ),
      );
    },
  };
}
