/**
 * Time as the platform's timers see it: calls (and the loopback carrier's phone), conversations,
 * sweeps, polls, heartbeats, lease renewals, retries of a call's end, and the expiry of recording
 * links and cached robots.txt answers. Production uses the system clock; tests and benchmarks may
 * inject a `ManualClock` and move time themselves, so a 40-second silence timer or a 60-second
 * sweep takes no real time.
 * The first three members match XState's `clock` option, so the same object drives delayed
 * transitions.
 *
 * The campaigns' dialler is on the clock throughout: its calling windows, and the due times,
 * claim leases and pace it compares in the database, are the clock's time passed into its
 * statements (campaigns/dialling.ts), so a scripted clock moves a whole campaign.
 *
 * What stays off the clock, because real time is the contract there: timestamps stored in the
 * database and the leases, expiries and due times compared there (PostgreSQL's `now()`, shared by
 * every process: sessions and tokens included); bounds on and retries of outside I/O (a vendor's
 * stall, an outbound fetch, a database probe, a search index's retry, the notification
 * connection's reconnect, a socket that must start streaming); a vendor's keep-alive, owed in its
 * time; request rate limits (the rate of real clients); latency measurements; the bounds of a stop, which a supervisor measures in real time; and
 * the embedded PostgreSQL's processes.
 */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /**
   * Runs `task` every `ms` until the returned function is called. The next run is timed from the
   * end of the last (a promise `task` returns is waited for), so runs never overlap. Background
   * work: on the system clock it never keeps the process alive.
   */
  every(ms: number, task: () => unknown): () => void;
}

/** `task` every `ms` on timers made by `schedule`; see `Clock.every`. */
function repeat(schedule: (callback: () => unknown, ms: number) => unknown, cancel: (handle: unknown) => void, ms: number, task: () => unknown): () => void {
  let stopped = false;
  let handle: unknown;
  const arm = () => {
    if (!stopped) handle = schedule(run, ms);
  };
  const run = () => {
    let result: unknown;
    try {
      result = task();
    } catch (error) {
      arm();
      throw error;
    }
    if (!(result instanceof Promise)) return arm();
    return result.finally(arm);
  };
  arm();
  return () => {
    stopped = true;
    cancel(handle);
  };
}

export const systemClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  every: (ms, task) =>
    repeat(
      (callback, delay) => setTimeout(callback, delay).unref(),
      (handle) => clearTimeout(handle as NodeJS.Timeout),
      ms,
      task,
    ),
};

/** Resolves after `ms` by `clock`, or at once when `signal` aborts (never rejects). */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const abort = () => {
      clock.clearTimeout(timer);
      resolve();
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/**
 * An AbortSignal that aborts at `at` (clock time), or at once if that has passed; `done` drops its
 * timer (call it when the work it bounds is over).
 */
export function deadlineSignal(clock: Clock, at: number, reason: () => Error): { signal: AbortSignal; done(): void } {
  const controller = new AbortController();
  if (at <= clock.now()) {
    controller.abort(reason());
    return { signal: controller.signal, done: () => {} };
  }
  const timer = clock.setTimeout(() => controller.abort(reason()), at - clock.now());
  return { signal: controller.signal, done: () => clock.clearTimeout(timer) };
}

interface Timer {
  readonly id: number;
  readonly at: number;
  readonly callback: () => unknown;
}

/**
 * A clock that moves only when told to; due timers run in time order, each at its own time. Its
 * timers never keep the process alive (there is nothing real to wait for).
 *
 * For tests that need to know when the work a timer started is done, a callback may return a
 * promise (the runs of `every` return their task's): `settled()` waits for those, and
 * `nextTimer()` for a loop that waits on the clock to come round to waiting again.
 */
export class ManualClock implements Clock {
  private time: number;
  private nextId = 1;
  private timers: Timer[] = [];
  private readonly running = new Set<Promise<unknown>>();
  private timerWaiters: Array<(ms: number) => void> = [];

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimeout(callback: () => unknown, ms: number): unknown {
    const timer = { id: this.nextId++, at: this.time + Math.max(0, ms), callback };
    this.timers.push(timer);
    for (const waiter of this.timerWaiters.splice(0)) waiter(ms);
    return timer.id;
  }

  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((timer) => timer.id !== handle);
  }

  every(ms: number, task: () => unknown): () => void {
    return repeat((callback, delay) => this.setTimeout(callback, delay), (handle) => this.clearTimeout(handle), ms, task);
  }

  /** Number of timers waiting. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, running every timer that falls due on the way. */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      let next: Timer | undefined;
      for (const timer of this.timers) if (timer.at <= end && (!next || timer.at < next.at || (timer.at === next.at && timer.id < next.id))) next = timer;
      if (!next) break;
      this.timers.splice(this.timers.indexOf(next), 1);
      this.time = Math.max(this.time, next.at);
      const result = next.callback();
      if (result instanceof Promise) {
        const tracked: Promise<unknown> = result.catch(() => undefined).finally(() => this.running.delete(tracked));
        this.running.add(tracked);
      }
    }
    this.time = end;
  }

  /** Resolves once every promise returned by a timer this clock ran has settled. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.all(this.running);
  }

  /** Resolves with the delay of the next timer set from now on. */
  nextTimer(): Promise<number> {
    return new Promise((resolve) => this.timerWaiters.push(resolve));
  }
}
