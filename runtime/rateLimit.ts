/**
 * Token buckets by key (client IP, conversation): `capacity` requests at once, refilled at
 * `perMinute`. In memory, per process; a public endpoint found in a web page cannot be used to
 * drain an owner's balance quickly.
 */
export interface RateLimiter {
  /** Takes one token; when none is left, says how many seconds until one is. */
  take(key: string, now?: number): { ok: true } | { ok: false; retryAfterSeconds: number };
}

export function createRateLimiter(options: { capacity: number; perMinute: number }): RateLimiter {
  const buckets = new Map<string, { tokens: number; at: number }>();
  const perMs = options.perMinute / 60_000;
  let sweptAt = 0;
  return {
    take(key, now = Date.now()) {
      if (now - sweptAt > 60_000) {
        // Full buckets carry no information; dropping them bounds memory.
        for (const [k, b] of buckets) if (b.tokens + (now - b.at) * perMs >= options.capacity) buckets.delete(k);
        sweptAt = now;
      }
      const bucket = buckets.get(key) ?? { tokens: options.capacity, at: now };
      bucket.tokens = Math.min(options.capacity, bucket.tokens + (now - bucket.at) * perMs);
      bucket.at = now;
      buckets.set(key, bucket);
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return { ok: true };
      }
      return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000)) };
    },
  };
}
