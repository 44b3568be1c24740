import { errorText } from '@gpufarm/shared';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { windowStart, type RateLimitStore } from './rate-limit-store.js';

/** Every counter's Redis key starts with this (`gf:rl:<bucket>@<window start>`). */
export const REDIS_KEY_PREFIX = 'gf:rl';
/** A counter nobody compares with a limit: the store counts, `rate-limit.ts` judges. */
const NEVER_EXHAUSTED = Number.MAX_SAFE_INTEGER;
/** A call Redis has not answered in this long is counted in memory instead (a hung server must not hang requests). */
const COMMAND_TIMEOUT_MS = 500;
/** How long the first connection may take before the start fails. */
const CONNECT_TIMEOUT_MS = 10_000;

export interface RedisRateLimitStoreOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…` (TLS). */
  url: string;
  /** Told when Redis stops answering (the counts go on per process, in memory) and when it answers again. */
  onConnectionChange?: (change: { up: boolean; message: string; err?: unknown }) => void;
}

/** `redis://host:port`, without the credentials a URL may hold, for messages. */
export function redisAddress(url: string): string {
  const parsed = new URL(url);
  return `${parsed.protocol}//${parsed.host}`;
}

/**
 * Counters in Redis, shared by every replica that names the same server: rate-limiter-flexible's
 * `RateLimiterRedis` (one atomic script per key: create with its expiry, increment, read the
 * expiry) on an ioredis client, one limiter per window length. Windows are the same fixed,
 * clock-aligned windows as the memory store's: each window of a bucket is its own Redis key,
 * which expires one window after its first hit, so nothing needs sweeping. A request's keys go
 * out together (ioredis pipelines the commands of one tick into one write).
 *
 * While Redis does not answer (not connected, or a call takes over 500 ms), the limiter's
 * insurance counts in this process's memory: limits hold per replica instead of failing every
 * request. Resolves once connected; a server that does not answer within 10 s fails the start,
 * the message naming `GF_REDIS_URL`.
 */
export async function connectRedisRateLimitStore(options: RedisRateLimitStoreOptions): Promise<RateLimitStore> {
  const address = redisAddress(options.url);
  const client = new Redis(options.url, {
    // Fail fast rather than queue while disconnected: the insurance limiter answers instead.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    enableAutoPipelining: true,
    lazyConnect: true,
  });
  // Told from the first connection on, and not while closing.
  let quiet = true;
  let up = false;
  const changed = (next: boolean, err?: unknown) => {
    if (next === up) return;
    up = next;
    if (quiet) return;
    options.onConnectionChange?.(
      next
        ? { up: true, message: `rate limits: Redis at ${address} answers again; limits are shared by the replicas again` }
        : { up: false, message: `rate limits: Redis at ${address} does not answer; each replica counts its own limits in memory until it does`, err },
    );
  };
  client.on('ready', () => changed(true));
  client.on('error', (err: unknown) => changed(false, err));
  client.on('close', () => changed(false));

  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    throw new Error(`GF_REDIS_URL: Redis does not answer at ${address} (${errorText(err)}); start it, or unset GF_REDIS_URL to keep limits in each process's memory`, { cause: err });
  }
  quiet = false;

  const limiters = new Map<number, RateLimiterRedis>();
  const limiterFor = (windowMs: number) => {
    let limiter = limiters.get(windowMs);
    if (!limiter) {
      const duration = Math.ceil(windowMs / 1000);
      limiter = new RateLimiterRedis({
        storeClient: client,
        keyPrefix: REDIS_KEY_PREFIX,
        points: NEVER_EXHAUSTED,
        duration,
        rejectIfRedisNotReady: true,
        insuranceLimiter: new RateLimiterMemory({ keyPrefix: REDIS_KEY_PREFIX, points: NEVER_EXHAUSTED, duration }),
      });
      limiters.set(windowMs, limiter);
    }
    return limiter;
  };

  return {
    async hit(keys, windowMs, now) {
      const start = windowStart(now, windowMs);
      const limiter = limiterFor(windowMs);
      const results = await Promise.all(keys.map((key) => limiter.consume(`${key}@${start}`).catch((res: unknown) => (res instanceof RateLimiterRes ? res : Promise.reject(res)))));
      return results.map((res) => ({ hits: res.consumedPoints, resetAt: start + windowMs }));
    },
    async close() {
      quiet = true;
      await client.quit().catch(() => client.disconnect());
    },
  };
}
