/**
 * Where fixed-window counters live. One process uses the in-memory store; several replicas
 * share the PostgreSQL one (`postgres-store.ts`). Both implement the same contract.
 */
export interface RateLimitStore {
    /** Counts one hit in `key`'s current window and returns the count so far in it. */
    hit(key: string, windowMs: number, now: number): Promise<{
        hits: number;
        resetAt: number;
    }>;
    close(): Promise<void>;
}
export declare function windowStart(now: number, windowMs: number): number;
export declare function createMemoryRateLimitStore(): RateLimitStore;
