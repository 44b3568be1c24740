import { createHmac } from 'node:crypto';
import { ApiError } from '@gpufarm/shared';
import fp from 'fastify-plugin';
import { LIMITS, type Limit } from './rate-limit-limits.js';
import type { RateLimitStore } from './rate-limit-store.js';

export interface RateLimitOptions {
  store: RateLimitStore;
  /** Secret salt for hashing client addresses; raw addresses are never stored or logged. */
  clientHashSalt: string;
  now?: () => number;
}

export function hashClientAddress(salt: string, address: string): string {
  return createHmac('sha256', salt).update(address).digest('hex').slice(0, 32);
}

/** The 429 of an exhausted bucket, with Retry-After (at least 1 s). */
function rateLimited(limit: Limit, resetInMs: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil(resetInMs / 1000));
  return new ApiError('rate_limited', `Too many requests: the ${limit.name} limit is ${limit.max} per ${limit.windowMs / 1000} s. Retry after ${retryAfter} s.`, {
    headers: { 'Retry-After': String(retryAfter) },
  });
}

/**
 * Counts one use of something costly (beyond the request itself) against `limit` for
 * `subject` (`addr:<hash>`, or a fixed name for a bucket all clients share); throws 429
 * `rate_limited` once the bucket is exhausted.
 */
export async function countAgainst(store: RateLimitStore, limit: Limit, subject: string, at: number): Promise<void> {
  const { hits, resetAt } = await store.hit(`${limit.name}:${subject}`, limit.windowMs, at);
  if (hits > limit.max) throw rateLimited(limit, resetAt - at);
}

/**
 * Counts every request against its buckets: the key's (or the anonymous address's) and the
 * route's own bucket. The bucket closest to its limit sets the X-RateLimit-* headers; any
 * exhausted bucket answers 429 `rate_limited` with Retry-After. Admin calls with a valid
 * token and probes (`probe` routes) are not limited.
 */
export const rateLimit = fp<RateLimitOptions>(
  async (app, options) => {
    const now = options.now ?? Date.now;
    app.addHook('onRequest', async (request, reply) => {
      const { auth, rateBucket, webFile, probe } = request.routeOptions.config;
      if ((auth === 'admin' && request.isAdmin) || auth === 'machine' || auth === 'signed_url' || webFile || probe) return;
      const subject = request.principal ? `key:${request.principal.keyId}` : `addr:${hashClientAddress(options.clientHashSalt, request.ip)}`;
      const limits: Limit[] = [request.principal ? LIMITS.perKey : LIMITS.anonymous];
      if (rateBucket) limits.push(LIMITS[rateBucket]);
      const at = now();
      let binding: { limit: Limit; remaining: number; resetAt: number } | undefined;
      let exceeded: { limit: Limit; resetAt: number } | undefined;
      for (const limit of limits) {
        const { hits, resetAt } = await options.store.hit(`${limit.name}:${subject}`, limit.windowMs, at);
        const remaining = Math.max(0, limit.max - hits);
        if (!binding || remaining < binding.remaining) binding = { limit, remaining, resetAt };
        if (hits > limit.max && !exceeded) exceeded = { limit, resetAt };
      }
      if (!binding) return;
      const resetSeconds = Math.max(1, Math.ceil((binding.resetAt - at) / 1000));
      reply.header('X-RateLimit-Limit', String(binding.limit.max));
      reply.header('X-RateLimit-Remaining', String(binding.remaining));
      reply.header('X-RateLimit-Reset', String(resetSeconds));
      if (exceeded) throw rateLimited(exceeded.limit, exceeded.resetAt - at);
    });
  },
  { name: 'gpufarm-rate-limit' },
);
