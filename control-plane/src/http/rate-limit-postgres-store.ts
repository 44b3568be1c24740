import type { Queryable } from '../db/database.js';
import { windowStart, type RateLimitStore } from './rate-limit-store.js';

/** Counters in the UNLOGGED `rate_limit_counters` table, shared by every replica. */
export function createPostgresRateLimitStore(db: Queryable, options: { sweepEveryMs?: number } = {}): RateLimitStore {
  const sweep = setInterval(() => {
    db.query('DELETE FROM rate_limit_counters WHERE window_start < $1', [Date.now() - 10 * 60_000]).catch(() => {});
  }, options.sweepEveryMs ?? 60_000);
  sweep.unref();
  return {
    async hit(key, windowMs, now) {
      const start = windowStart(now, windowMs);
      const [row] = await db.query<{ hits: number }>(
        `INSERT INTO rate_limit_counters (bucket_key, window_start, hits) VALUES ($1, $2, 1)
         ON CONFLICT (bucket_key, window_start) DO UPDATE SET hits = rate_limit_counters.hits + 1
         RETURNING hits`,
        [key, start],
      );
      return { hits: row?.hits ?? 1, resetAt: start + windowMs };
    },
    async close() {
      clearInterval(sweep);
    },
  };
}
