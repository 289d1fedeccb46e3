/**
 * A signal for a streamed response that also aborts when `touch()` has not been called for `ms`
 * (the vendor went quiet; fetch and SDK timeouts end once headers arrive). `stalled` tells a
 * stall apart from the caller's own cancellation; `dispose()` stops the timer.
 */
export function stallGuard(outer: AbortSignal | undefined, ms: number) {
  const stall = new AbortController();
  const timer = setTimeout(() => stall.abort(), ms);
  return {
    signal: outer ? AbortSignal.any([outer, stall.signal]) : stall.signal,
    touch(): void {
      timer.refresh();
    },
    get stalled(): boolean {
      return stall.signal.aborted && !outer?.aborted;
    },
    dispose(): void {
      clearTimeout(timer);
    },
  };
}
