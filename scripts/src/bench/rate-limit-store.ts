import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedisServer } from '@gpufarm/control-plane/testing';
import type { SectionContext } from './capacity.js';
import { processCpuSeconds } from './cpu.js';
import { measure, type LoadOptions, type LoadResult } from './load.js';
import type { BenchRow } from './report.js';
import type { BenchServer } from './server.js';

/** What the section needs besides the common context. */
export interface RateLimitStoreSectionContext extends SectionContext {
  /** Starts another control plane as the bench's own (same database and settings), with `env` on top. */
  startServer(env: Record<string, string>): Promise<BenchServer>;
}

/** Shared limits may cost at most a fifth of the memory store's rate. */
const MIN_RATIO = 0.8;

/** The round whose rate is the median (the lower middle one of an even count). */
function medianRound(results: readonly LoadResult[]): LoadResult {
  return [...results].sort((a, b) => a.requestsPerSecond - b.requestsPerSecond)[Math.floor((results.length - 1) / 2)]!;
}

/**
 * Shared rate limits: `GET /v1` on a second control plane started as the bench's own but with
 * its limits in Redis (`GF_REDIS_URL`, a redis-server of the section's own), against the bench's
 * own control plane with its limits in memory (the default). Every call counts in one bucket per
 * client address, as the anonymous limit does. The two are measured in turn,
 * `BENCH_STORE_ROUNDS` (3) times each, so that other work on the machine weighs on both alike;
 * the row is Redis's median round, its ratio taken to the memory store's median round, and
 * Redis's own CPU per request (over its rounds) is in the note. Target: at least 0.8.
 */
export async function rateLimitStoreSection(ctx: RateLimitStoreSectionContext): Promise<BenchRow[]> {
  const label = 'GET /v1';
  if (!ctx.wanted(label)) return [];
  const rounds = Number(process.env.BENCH_STORE_ROUNDS || 3);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`BENCH_STORE_ROUNDS must be a positive integer, got ${JSON.stringify(process.env.BENCH_STORE_ROUNDS)}`);
  const dir = mkdtempSync(join(tmpdir(), 'gf-bench-redis-'));
  const redis = await startRedisServer({ dir });
  try {
    const server = await ctx.startServer({ GF_RATE_LIMIT_STORE: 'redis', GF_REDIS_URL: redis.url });
    try {
      ctx.log(`  ${label}, rate limits in memory and in Redis in turn, ${rounds} rounds (control plane pid ${server.pid}, redis-server pid ${redis.pid}) ...`);
      const common = { path: '/v1', connections: ctx.connections, durationSeconds: ctx.durationSeconds, warmupSeconds: 0 };
      const inMemory: LoadOptions = { ...common, baseUrl: ctx.baseUrl, cpu: ctx.cpu };
      const inRedis: LoadOptions = { ...common, baseUrl: server.url, cpu: { ...ctx.cpu, serverPid: server.pid } };
      // The new process warms up as `measure` warms up any endpoint; the bench's own is warm.
      if (ctx.warmupSeconds > 0) await measure({ ...inRedis, durationSeconds: ctx.warmupSeconds });
      const memoryRounds: LoadResult[] = [];
      const redisRounds: LoadResult[] = [];
      let redisSeconds = 0;
      for (let round = 1; round <= rounds; round++) {
        memoryRounds.push(await measure(inMemory));
        const before = processCpuSeconds(redis.pid);
        redisRounds.push(await measure(inRedis));
        redisSeconds += processCpuSeconds(redis.pid) - before;
        ctx.log(`    round ${round}: memory ${memoryRounds.at(-1)!.requestsPerSecond.toFixed(0)} req/s, Redis ${redisRounds.at(-1)!.requestsPerSecond.toFixed(0)} req/s`);
      }
      const memory = medianRound(memoryRounds);
      const requests = redisRounds.reduce((n, r) => n + r.requests, 0);
      const redisUs = requests > 0 ? (redisSeconds * 1e6) / requests : 0;
      return [
        {
          label,
          note: `rate limits in Redis, median of ${rounds} rounds; redis-server ${Math.round(redisUs)} µs/req; ratio to the memory store's median round in turn with it, ${Math.round(memory.requestsPerSecond).toLocaleString('en-US')} req/s, ${Math.round(memory.serverCpuUsPerRequest)} µs/req`,
          result: medianRound(redisRounds),
          reference: memory,
          target: { minRatio: MIN_RATIO, maxP99Ms: Number.POSITIVE_INFINITY },
          targetText: `≥ ${MIN_RATIO}× the memory store's req/s`,
        },
      ];
    } finally {
      await server.stop();
    }
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
