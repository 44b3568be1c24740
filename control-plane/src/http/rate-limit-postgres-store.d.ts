import type { Queryable } from '../db/database.js';
import { type RateLimitStore } from './rate-limit-store.js';
/** Counters in the UNLOGGED `rate_limit_counters` table, shared by every replica. */
export declare function createPostgresRateLimitStore(db: Queryable, options?: {
    sweepEveryMs?: number;
}): RateLimitStore;
