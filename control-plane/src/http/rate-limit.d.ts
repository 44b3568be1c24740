import type { RateLimitStore } from './rate-limit-store.js';
export interface RateLimitOptions {
    store: RateLimitStore;
    /** Secret salt for hashing client addresses; raw addresses are never stored or logged. */
    clientHashSalt: string;
    now?: () => number;
}
export declare function hashClientAddress(salt: string, address: string): string;
/**
 * Counts every request against its buckets: the key's (or the anonymous address's) and the
 * route's own bucket. The bucket closest to its limit sets the X-RateLimit-* headers; any
 * exhausted bucket answers 429 `rate_limited` with Retry-After. Admin calls with a valid
 * token are not limited.
 */
export declare const rateLimit: import("fastify").FastifyPluginCallback<RateLimitOptions, import("fastify").RawServerDefault, import("fastify").FastifyTypeProviderDefault, import("fastify").FastifyBaseLogger>;
