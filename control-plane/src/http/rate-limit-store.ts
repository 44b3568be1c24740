/**
 * Where fixed-window counters live. One process uses the in-memory store; several replicas
 * share the Redis one (`rate-limit-redis-store.ts`). Both implement the same contract.
 */
export interface RateLimitStore {
  /**
   * Counts one hit in each key's current window (all of one length) and returns each count so
   * far, in the order of `keys`, which are distinct.
   */
  hit(keys: readonly string[], windowMs: number, now: number): Promise<Array<{ hits: number; resetAt: number }>>;
  close(): Promise<void>;
}

export function windowStart(now: number, windowMs: number): number {
  return Math.floor(now / windowMs) * windowMs;
}

/** `sweepMs`: how often ended windows are dropped. */
export function createMemoryRateLimitStore(options: { sweepMs?: number } = {}): RateLimitStore {
  const counters = new Map<string, { hits: number; resetAt: number }>();
  /**
   * The latest `now` a hit brought: windows end by the clock the hits are counted on (the
   * limiter's), not the wall clock, or a limiter on another clock (a pinned one in tests) would
   * see its counts dropped mid-window by a sweep.
   */
  let latest = Number.NEGATIVE_INFINITY;
  // Drops ended windows now and then, so memory follows the number of active callers.
  const sweep = setInterval(() => {
    for (const [key, counter] of counters) if (counter.resetAt <= latest) counters.delete(key);
  }, options.sweepMs ?? 30_000);
  sweep.unref();
  return {
    async hit(keys, windowMs, now) {
      if (now > latest) latest = now;
      const start = windowStart(now, windowMs);
      return keys.map((key) => {
        const id = `${key}@${start}`;
        const counter = counters.get(id);
        if (counter) {
          counter.hits += 1;
          return { ...counter };
        }
        const fresh = { hits: 1, resetAt: start + windowMs };
        counters.set(id, fresh);
        return { ...fresh };
      });
    },
    async close() {
      clearInterval(sweep);
      counters.clear();
    },
  };
}
