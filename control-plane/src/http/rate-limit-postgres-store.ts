import type { Queryable } from '../db/database.js';
import { windowStart, type RateLimitStore } from './rate-limit-store.js';

/** Counters in the UNLOGGED `rate_limit_counters` table, shared by every replica. */
export function createPostgresRateLimitStore(db: Queryable, options: { sweepEveryMs?: number } = {}): RateLimitStore {
  const sweep = setInterval(() => {
    db.query('DELETE FROM rate_limit_counters WHERE window_start < $1', [Date.now() - 10 * 60_000]).catch(() => {});
  }, options.sweepEveryMs ?? 60_000);
  sweep.unref();
  return {
    async hit(keys, windowMs, now) {
      const start = windowStart(now, windowMs);
      // One statement for all of a request's buckets; rows taken in key order, so two requests
      // sharing buckets (an account's) cannot lock them in opposite orders.
      const rows = await db.query<{ bucket_key: string; hits: number }>(
        `INSERT INTO rate_limit_counters (bucket_key, window_start, hits)
         SELECT key, $2, 1 FROM unnest($1::text[]) AS key ORDER BY key
         ON CONFLICT (bucket_key, window_start) DO UPDATE SET hits = rate_limit_counters.hits + 1
         RETURNING bucket_key, hits`,
        [[...keys], start],
      );
      const hits = new Map(rows.map((row) => [row.bucket_key, Number(row.hits)]));
      return keys.map((key) => ({ hits: hits.get(key) ?? 1, resetAt: start + windowMs }));
    },
    async close() {
      clearInterval(sweep);
    },
  };
}
