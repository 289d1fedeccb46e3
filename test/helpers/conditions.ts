/**
 * Promises that resolve once a condition on a fake's or a test's state holds. The owner of the
 * state calls `changed()` after each change; `until` resolves at once if the condition holds.
 */
export class Conditions {
  private waiting: Array<{ holds: () => boolean; resolve: () => void }> = [];

  until(holds: () => boolean): Promise<void> {
    if (holds()) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push({ holds, resolve }));
  }

  changed(): void {
    const met = this.waiting.filter((waiter) => waiter.holds());
    this.waiting = this.waiting.filter((waiter) => !met.includes(waiter));
    for (const waiter of met) waiter.resolve();
  }
}
