import { writeImageReport } from '@gpufarm/control-plane/agent-gateway';
import { migrate, openPostgres } from '@gpufarm/control-plane/db';
import { createFarm, createJobOwner, createMachine, createQueuedJobs, mulberry32 } from '@gpufarm/control-plane/testing';
import { syncCatalog } from '@gpufarm/control-plane/fleet';
import { matchQueuedJobs } from '@gpufarm/control-plane/matching';
import { createBenchDatabase } from './database.js';
import { benchImageName as imageName, benchImageReport as reportOf } from './image-reports.js';
import { matchingSecondsPerJob } from './matching.js';
import { alignedTable } from './report.js';
import type { StandaloneSection } from './standalone.js';

const MACHINES = 100;
/** Images each machine's cache has room for (least recently used evicted first). */
const SLOTS = 5;
const JOBS = 1_000;
const IMAGES = 50;
/** Zipf exponent of the images' popularity. */
const ZIPF_S = 1;
/** Jobs arriving per round; each runs 1 to 4 rounds, so about 60 of the 100 machines are busy. */
const PER_ROUND = 25;
/** Targets (issue 34): at least twice the warm starts of the same market without image-aware matching, at most 1.2× the matching bench's time per job. */
const TARGET_WARM_RATIO = 2;
const TARGET_TIME_RATIO = 1.2;

/** The images of `count` jobs drawn by a Zipf law over `IMAGES` images (seeded: both runs get the same queue). */
function zipfQueue(count: number): number[] {
  const random = mulberry32(34);
  const weights = Array.from({ length: IMAGES }, (_, i) => 1 / (i + 1) ** ZIPF_S);
  const total = weights.reduce((a, b) => a + b, 0);
  return Array.from({ length: count }, () => {
    let r = random() * total;
    for (let i = 0; i < IMAGES; i++) {
      r -= weights[i]!;
      if (r <= 0) return i;
    }
    return IMAGES - 1;
  });
}

interface MarketRun {
  warm: number;
  matched: number;
  matcherSeconds: number;
  passes: number;
}

/**
 * One run of the simulated market on a fresh database: `MACHINES` machines of one GPU, one class,
 * one region and one price (every machine fits every job equally on the customer's terms; tiers
 * and uptimes differ, so the matcher's usual tie-break picks among them), jobs arriving
 * `PER_ROUND` a round in queue order and matched by the real matcher (`matchQueuedJobs`); a job
 * starts warm when its machine's cache held its image. Each machine's cache keeps `SLOTS` images,
 * evicting the least recently used. With `imageAware`, every cache change is reported through the
 * gateway's image store (`writeImageReport`), as an agent's heartbeat would; without, nothing is
 * reported and the matcher matches as it did before images.
 */
async function runMarket(serverUrl: string, imageAware: boolean): Promise<MarketRun> {
  const database = await createBenchDatabase(serverUrl);
  const db = openPostgres(database.url);
  try {
    await migrate(db);
    await syncCatalog(db);
    const farm = await createFarm(db, { slug: 'startup-bench' });
    const random = mulberry32(7);
    const tiers = ['S', 'A', 'B', 'C'] as const;
    const machineIds: string[] = [];
    for (let i = 0; i < MACHINES; i++) {
      const m = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-80gb', gpuCount: 1, pricePerGpuHourMicroUsd: 1_000_000, benchmarkTier: tiers[Math.floor(random() * tiers.length)]! });
      machineIds.push(m.id);
    }
    // Enrolled agents (a machine token) and GPU UUIDs, as the matcher requires.
    await db.query(`UPDATE machine_gpus SET uuid = 'GPU-' || md5(machine_id || ':' || gpu_index)`);
    await db.query('UPDATE machines SET token_hash = md5(id)');
    const owner = await createJobOwner(db);
    const queue = zipfQueue(JOBS);
    const caches = new Map<string, Array<{ image: number; usedAt: number }>>(machineIds.map((id) => [id, []]));
    /** Machine id → the round its job ends. */
    const busyUntil = new Map<string, number>();
    const imageOf = new Map<string, number>();
    const durations = mulberry32(11);
    const run: MarketRun = { warm: 0, matched: 0, matcherSeconds: 0, passes: 0 };
    let clock = Date.parse('2026-11-01T00:00:00Z');
    for (let round = 0, next = 0; run.matched < JOBS && round < 10 * JOBS; round++) {
      const ended = [...busyUntil].filter(([, until]) => until <= round).map(([id]) => id);
      if (ended.length > 0) {
        await db.query('UPDATE machine_gpus SET busy = false, assignment_id = NULL WHERE machine_id = ANY($1::text[])', [ended]);
        for (const id of ended) busyUntil.delete(id);
      }
      const arriving = queue.slice(next, next + PER_ROUND);
      next += arriving.length;
      const ids = await createQueuedJobs(db, owner, arriving.map((image) => ({ spec: { image: imageName(image) }, capMicroUsd: 1_000_000 })));
      ids.forEach((id, i) => imageOf.set(id, arriving[i]!));
      const started = performance.now();
      const result = await matchQueuedJobs({ db }, { batchSize: 2_000 });
      run.matcherSeconds += (performance.now() - started) / 1000;
      run.passes += 1;
      const changed = new Set<string>();
      for (const m of result.matched) {
        const image = imageOf.get(m.jobId)!;
        const cache = caches.get(m.machineId)!;
        clock += 1_000;
        const held = cache.find((c) => c.image === image);
        if (held) {
          run.warm += 1;
          held.usedAt = clock;
        } else {
          cache.push({ image, usedAt: clock });
          if (cache.length > SLOTS) cache.splice(cache.indexOf(cache.reduce((a, b) => (a.usedAt <= b.usedAt ? a : b))), 1);
        }
        changed.add(m.machineId);
        busyUntil.set(m.machineId, round + 1 + Math.floor(durations() * 4));
        run.matched += 1;
      }
      await db.query(`UPDATE jobs SET status = 'CANCELED' WHERE status = 'MATCHING'`);
      if (imageAware) for (const id of changed) await writeImageReport(db, id, reportOf(caches.get(id)!));
    }
    return run;
  } finally {
    await db.close();
    await database.drop();
  }
}

/**
 * Image-aware matching on a simulated market: the fraction of `JOBS` jobs that start warm with it
 * against the same market and queue without it, and the matcher's time per job on the matching
 * bench's fleet and queue with every machine reporting its images against the same without
 * (`matchingSecondsPerJob`, both in this run). The section's other part,
 * the cold and warm start of a large image, is `startup-pull.ts`.
 */
export async function imageAwareMarket(log: (line: string) => void): Promise<{ table: string[]; missed: string[] }> {
  const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';
  const without = await runMarket(serverUrl, false);
  log(`without image-aware matching: ${without.warm}/${without.matched} jobs started warm; matcher ${(without.matcherSeconds * 1000).toFixed(0)} ms in ${without.passes} passes`);
  const aware = await runMarket(serverUrl, true);
  log(`with image-aware matching: ${aware.warm}/${aware.matched} jobs started warm; matcher ${(aware.matcherSeconds * 1000).toFixed(0)} ms in ${aware.passes} passes`);
  const reference = await matchingSecondsPerJob(log);
  const withImages = await matchingSecondsPerJob(log, { images: true });
  const warmRatio = without.warm === 0 ? Infinity : aware.warm / without.warm;
  const perJob = (r: MarketRun) => r.matcherSeconds / Math.max(1, r.matched);
  const timeRatio = withImages / reference;
  const warmPass = warmRatio >= TARGET_WARM_RATIO;
  const timePass = timeRatio <= TARGET_TIME_RATIO;
  const pct = (r: MarketRun) => `${((100 * r.warm) / Math.max(1, r.matched)).toFixed(1)} %`;
  const ms = (s: number) => `${(s * 1000).toFixed(3)} ms`;
  const table = alignedTable([
    ['image-aware matching, simulated market', 'without', 'with', 'ratio', 'target', 'result'],
      [`jobs starting warm (${MACHINES} machines x ${SLOTS} images, ${JOBS} jobs, Zipf over ${IMAGES} images)`, pct(without), pct(aware), `${warmRatio.toFixed(2)}x`, `>= ${TARGET_WARM_RATIO}x`, warmPass ? 'PASS' : 'FAIL'],
    ['matcher time per job, the matching bench\'s fleet and queue, every machine reporting 5 images', ms(reference), ms(withImages), `${timeRatio.toFixed(2)}x`, `<= ${TARGET_TIME_RATIO}x`, timePass ? 'PASS' : 'FAIL'],
    // The market matches 25 jobs a pass against the bench's 2,000: a pass's fixed cost weighs more per job here.
    ['matcher time per job on this simulated market', ms(perJob(without)), ms(perJob(aware)), `${(perJob(aware) / perJob(without)).toFixed(2)}x`, 'reported', '-'],
  ]);
  const missed = [
    ...(warmPass ? [] : [`startup: warm starts ${warmRatio.toFixed(2)}x with image-aware matching (target ${TARGET_WARM_RATIO}x)`]),
    ...(timePass ? [] : [`startup: matcher time per job with image reports ${timeRatio.toFixed(2)}x the matching bench's without (target ${TARGET_TIME_RATIO}x)`]),
  ];
  return { table, missed };
}

/** `npm run bench -- --only startup`: the simulated market's part of the startup section. */
export const startupMatchingSection: StandaloneSection = { name: 'startup: image-aware matching on a simulated market', run: imageAwareMarket };
