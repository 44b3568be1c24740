import { createApiKey, keyEnvironmentFor } from '@gpufarm/control-plane/auth';
import { loadConfig } from '@gpufarm/control-plane/config';
import { openPostgres } from '@gpufarm/control-plane/db';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import type { SectionContext } from './capacity.js';
import { measureCpu, type LoadResult } from './load.js';
import type { BenchRow } from './report.js';

/** What the job creation section needs besides the common context. */
export interface JobsSectionContext extends SectionContext {
  /** The bench database, where the section creates its API keys. */
  databaseUrl: string;
  /** The run's baseline (`GET /v1`), to express the absolute target as a ratio of it. */
  baseline: LoadResult | undefined;
}

/** Target on 2 cores: at least this many creations per second... */
const MIN_CREATIONS_PER_SECOND = 1000;
/** ...with a 99th percentile below this. */
const MAX_P99_MS = 100;
/** `POST /v1/jobs` allows 30 a minute per key: each key makes at most this many, then is retired. */
const CALLS_PER_KEY = 25;
/** Keys are made for this rate (creations per second) over warm-up and measurement; BENCH_JOB_KEYS overrides. */
const PLANNED_RATE = 5000;

/**
 * A realistic creation: one 24 GiB GPU for inference, a price cap, an egress allowlist, env
 * and an output rule, paid in ETH, so validation, the policy, pricing against the seeded fleet,
 * the escrow terms and funding calls, and the insert all run in full.
 */
const JOB_BODY = JSON.stringify({
  image: 'ghcr.io/acme/llm-server:2.1',
  command: ['python', '-m', 'server', '--model', 'llama-3-8b', '--max-batch', '8'],
  gpu: { count: 1, minimumVramGb: 24 },
  workloadType: 'inference',
  maxRuntimeSeconds: 3600,
  maxPricePerGpuHour: '25.00',
  estRuntime: { minSeconds: 600, maxSeconds: 1800 },
  paymentToken: 'eth',
  env: { MODEL_NAME: 'llama-3-8b', BATCH_SIZE: '8' },
  networkPolicy: { mode: 'allowlist', allow: ['huggingface.co', 'cdn-lfs.huggingface.co'] },
  outputRules: [{ path: '/output', maxBytes: 1024 ** 3 }],
  regionPreference: 'europe-west',
  title: 'bench inference job',
});

function keysWanted(seconds: number): number {
  const raw = process.env.BENCH_JOB_KEYS;
  if (raw !== undefined && raw !== '') {
    if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new Error(`BENCH_JOB_KEYS must be a positive integer, got ${JSON.stringify(raw)}`);
    return Number(raw);
  }
  return Math.ceil((PLANNED_RATE * seconds) / CALLS_PER_KEY);
}

/** Creates `count` accounts with one `jobs:create` key each, directly in the bench database. */
async function createKeys(databaseUrl: string, count: number): Promise<string[]> {
  const environment = keyEnvironmentFor(loadConfig(process.env).environment);
  const db = openPostgres(databaseUrl, { max: 8 });
  const keys: string[] = [];
  try {
    while (keys.length < count) {
      const batch = Array.from({ length: Math.min(64, count - keys.length) }, () =>
        createApiKey(db, { walletAddress: `0x${randomBytes(20).toString('hex')}`, scopes: ['jobs:create'], environment, label: 'bench' }),
      );
      keys.push(...(await Promise.all(batch)).map((k) => k.key));
    }
  } finally {
    await db.close();
  }
  return keys;
}

/** Hands out each key CALLS_PER_KEY times, in order; `exhausted` tells whether the pool ran dry (then it wraps). */
function keyRotation(keys: readonly string[]): { next(): string; used(): number; exhausted(): boolean } {
  let calls = 0;
  return {
    next: () => keys[Math.floor(calls++ / CALLS_PER_KEY) % keys.length]!,
    used: () => Math.min(keys.length, Math.ceil(calls / CALLS_PER_KEY)),
    exhausted: () => calls > keys.length * CALLS_PER_KEY,
  };
}

function run(ctx: JobsSectionContext, nextKey: () => string, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: `${ctx.baseUrl}/v1/jobs`,
    connections: ctx.connections,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        path: '/v1/jobs',
        headers: { 'content-type': 'application/json' },
        body: JOB_BODY,
        setupRequest: (request) => ({ ...request, headers: { ...request.headers, authorization: `Bearer ${nextKey()}` } }),
      },
    ],
  });
}

/**
 * `POST /v1/jobs` on real PostgreSQL: every call validates, runs the policy, prices against the
 * seeded fleet and inserts a job. Keys are created up front (one account each) and rotated per
 * request so no key exceeds the 30-a-minute creation limit: rate limiting stays on and never
 * binds. Target on 2 cores: >= 1,000 creations per second with p99 < 100 ms, shown next to
 * the run's baseline (`GET /v1`).
 */
export async function jobsSection(ctx: JobsSectionContext): Promise<BenchRow[]> {
  const label = 'POST /v1/jobs';
  if (!ctx.wanted(label)) return [];
  const count = keysWanted(ctx.warmupSeconds + ctx.durationSeconds);
  const started = performance.now();
  const keys = await createKeys(ctx.databaseUrl, count);
  ctx.log(`  ${keys.length} API keys created in ${((performance.now() - started) / 1000).toFixed(1)} s (each makes at most ${CALLS_PER_KEY} creations)`);
  const rotation = keyRotation(keys);

  // One creation first, so a broken route fails here with its answer rather than as a table of non-2xx.
  const probe = await fetch(`${ctx.baseUrl}/v1/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${rotation.next()}` },
    body: JOB_BODY,
  });
  if (probe.status !== 201) throw new Error(`POST /v1/jobs answered ${probe.status} to the bench body: ${(await probe.text()).slice(0, 500)}`);
  // Creation is measured as customers get it: escrow terms fixed and funding calls built.
  const created = (await probe.json()) as { funding: unknown; fundingUnavailable?: { message: string } };
  if (created.funding === null) throw new Error(`job creation answered without funding: ${created.fundingUnavailable?.message ?? 'no reason given'}`);

  ctx.log(`  ${label} ...`);
  if (ctx.warmupSeconds > 0) await run(ctx, rotation.next, ctx.warmupSeconds);
  const result = await measureCpu(ctx.cpu, () => run(ctx, rotation.next, ctx.durationSeconds));
  ctx.log(`  ${rotation.used()} of ${keys.length} keys used${rotation.exhausted() ? '; the pool ran dry and keys were reused: raise BENCH_JOB_KEYS' : ''}`);

  const pass = result.requestsPerSecond >= MIN_CREATIONS_PER_SECOND && result.p99Ms < MAX_P99_MS;
  ctx.log(`  ${label}: ${result.requestsPerSecond.toFixed(0)} creations/s, p99 ${result.p99Ms} ms: ${pass ? 'PASS' : 'FAIL'}`);
  // The report's targets are ratios of the baseline; this one is absolute, so it is expressed
  // as the ratio that equals it in this run.
  const baselineRps = ctx.baseline?.requestsPerSecond ?? 0;
  const target = baselineRps > 0 ? { minRatio: MIN_CREATIONS_PER_SECOND / baselineRps, maxP99Ms: MAX_P99_MS } : undefined;
  const note = `ETH, escrow terms and funding calls; ${keys.length.toLocaleString('en-US')} keys, rate limits on`;
  return [{ label, note, result, target, targetText: `≥ ${MIN_CREATIONS_PER_SECOND.toLocaleString('en-US')}/s, p99 < ${MAX_P99_MS} ms` }];
}
