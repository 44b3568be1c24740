import { createHmac } from 'node:crypto';
import { ApiError } from '@gpufarm/shared';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { accountCeiling, LIMITS, MACHINE_LIMIT, type Limit } from './rate-limit-limits.js';
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

/** A limit as counted for one subject; `scope` words the subject in a 429. */
interface Bucket {
  limit: Limit;
  key: string;
  scope: string;
}

/** The 429 of an exhausted bucket, with Retry-After (at least 1 s); `scope` words its subject. */
function rateLimited(limit: Limit, scope: string, resetInMs: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil(resetInMs / 1000));
  return new ApiError('rate_limited', `Too many requests: the ${limit.name} limit is ${limit.max} per ${limit.windowMs / 1000} s ${scope}. Retry after ${retryAfter} s.`, {
    headers: { 'Retry-After': String(retryAfter) },
  });
}

/**
 * Counts one use of something costly (beyond the request itself) against `limit` for
 * `subject` (`addr:<hash>`, or a fixed name for a bucket all clients share); throws 429
 * `rate_limited` once the bucket is exhausted.
 */
export async function countAgainst(store: RateLimitStore, limit: Limit, subject: string, at: number): Promise<void> {
  const [count] = await store.hit([`${limit.name}:${subject}`], limit.windowMs, at);
  if (count && count.hits > limit.max) throw rateLimited(limit, subject.startsWith('addr:') ? 'per client address' : 'for all clients together', count.resetAt - at);
}

/**
 * The buckets a request counts against: an API key's (or dashboard session's) own limit and its
 * route bucket, each again at the account's ceiling over all its keys and sessions; a machine
 * token's calls per machine; anything else per hashed client address (a bad key or token too).
 */
function bucketsOf(request: FastifyRequest, clientHashSalt: string): Bucket[] {
  const { auth, rateBucket } = request.routeOptions.config;
  const perCaller = (limit: Limit, subject: string, scope: string): Bucket => ({ limit, key: `${limit.name}:${subject}`, scope });
  const address = () => `addr:${hashClientAddress(clientHashSalt, request.ip)}`;
  if (auth === 'machine') return [request.machine ? perCaller(MACHINE_LIMIT, `machine:${request.machine.machineId}`, 'per machine') : perCaller(LIMITS.anonymous, address(), 'per client address')];
  const principal = request.principal;
  if (!principal) return [perCaller(LIMITS.anonymous, address(), 'per client address'), ...(rateBucket ? [perCaller(LIMITS[rateBucket], address(), 'per client address')] : [])];
  const limits: Limit[] = [LIMITS.perKey, ...(rateBucket ? [LIMITS[rateBucket]] : [])];
  return [
    ...limits.map((limit) => perCaller(limit, `key:${principal.keyId}`, principal.apiKeyId ? 'per API key' : 'per dashboard session')),
    ...limits.map((limit) => perCaller(accountCeiling(limit), `acct:${principal.accountId}`, 'for the whole account (all its API keys and dashboard sessions together)')),
  ];
}

/**
 * Counts every request against its buckets (`bucketsOf`). The bucket closest to its limit sets
 * the X-RateLimit-* headers; any exhausted bucket answers 429 `rate_limited` with Retry-After,
 * naming it. Admin calls with a valid token, signed URLs (counted when issued) and probes
 * (`probe` routes) are not limited.
 */
export const rateLimit = fp<RateLimitOptions>(
  async (app, options) => {
    const now = options.now ?? Date.now;
    app.addHook('onRequest', async (request, reply) => {
      const { auth, webFile, probe } = request.routeOptions.config;
      if ((auth === 'admin' && request.isAdmin) || auth === 'signed_url' || webFile || probe) return;
      const buckets = bucketsOf(request, options.clientHashSalt);
      const at = now();
      let binding: { limit: Limit; remaining: number; resetAt: number } | undefined;
      let exceeded: { bucket: Bucket; resetAt: number } | undefined;
      // Every limit has one window length today; grouped so that a new length costs one more statement, not one per bucket.
      for (const windowMs of new Set(buckets.map((b) => b.limit.windowMs))) {
        const group = buckets.filter((b) => b.limit.windowMs === windowMs);
        const counts = await options.store.hit(group.map((b) => b.key), windowMs, at);
        group.forEach((bucket, i) => {
          const { hits, resetAt } = counts[i]!;
          const remaining = Math.max(0, bucket.limit.max - hits);
          if (!binding || remaining < binding.remaining) binding = { limit: bucket.limit, remaining, resetAt };
          if (hits > bucket.limit.max && !exceeded) exceeded = { bucket, resetAt };
        });
      }
      if (!binding) return;
      const resetSeconds = Math.max(1, Math.ceil((binding.resetAt - at) / 1000));
      reply.header('X-RateLimit-Limit', String(binding.limit.max));
      reply.header('X-RateLimit-Remaining', String(binding.remaining));
      reply.header('X-RateLimit-Reset', String(resetSeconds));
      if (exceeded) throw rateLimited(exceeded.bucket.limit, exceeded.bucket.scope, exceeded.resetAt - at);
    });
  },
  { name: 'gpufarm-rate-limit' },
);
