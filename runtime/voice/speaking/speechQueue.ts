/**
 * Segments of one response spoken one after another while the model is still writing the next.
 * A failed segment must not surface while nobody awaits the queue (an unhandled rejection ends the
 * process, and every call in it): the first failure is kept, later segments are skipped, and
 * `done()` reports it once the response is written.
 */
export class SpeechQueue {
  private tail: Promise<void> = Promise.resolve();
  private failure: { readonly error: unknown } | undefined;

  add(speak: () => Promise<void>): void {
    this.tail = this.tail
      .then(() => (this.failure ? undefined : speak()))
      .catch((error: unknown) => {
        this.failure ??= { error };
      });
  }

  /** Resolves when everything queued was spoken; rejects with the first failure. */
  async done(): Promise<void> {
    await this.tail;
    if (this.failure) throw this.failure.error;
  }
}
