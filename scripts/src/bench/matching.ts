import { type Database, migrate, openPostgres } from '@gpufarm/control-plane/db';
import { syncCatalog } from '@gpufarm/control-plane/fleet';
import { createJobOwner, createQueuedJobs, mulberry32, type QueuedJobInput, seedFleet } from '@gpufarm/control-plane/testing';
import { matchQueuedJobs } from '@gpufarm/control-plane/matching';
import { REGIONS } from '@gpufarm/shared';
import { writeImageReport } from '@gpufarm/control-plane/agent-gateway';
import { createBenchDatabase, type BenchDatabase } from './database.js';
import { benchImageName, benchImageReport } from './image-reports.js';
import type { StandaloneResult, StandaloneSection } from './standalone.js';

const MACHINES = Number(process.env.BENCH_MATCH_MACHINES ?? 10_000);
const JOBS = Number(process.env.BENCH_MATCH_JOBS ?? 10_000);
const BATCH = Number(process.env.BENCH_MATCH_BATCH ?? 2_000);
/** Target: every queued job matched within this many seconds. */
const TARGET_SECONDS = 10;

/**
 * Classes customers pin: datacenter cards the seeded fleet has thousands of free for `custom`
 * jobs (L40S farms often accept only some workload types, so it is left out).
 */
const PINNED = ['h100-80gb-sxm', 'h100-80gb-pcie', 'a100-80gb'];

/**
 * A queue like a marketplace's: mostly 1-GPU jobs, some 2, 4 and 8; a quarter pin one or two
 * datacenter classes, a tenth ask for 40 GiB, a third name a region. The seeded fleet's free
 * GPUs hold all of it with room to spare (the bench times the matcher, not a shortage).
 */
function queue(count: number, images: boolean): QueuedJobInput[] {
  const random = mulberry32(7);
  const imageOf = mulberry32(8);
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  const jobs: QueuedJobInput[] = [];
  for (let i = 0; i < count; i++) {
    const roll = random();
    const gpus = roll < 0.8 ? 1 : roll < 0.95 ? 2 : roll < 0.99 ? 4 : 8;
    const allow = random() < 0.25 ? [...new Set([pick(PINNED), pick(PINNED)])] : null;
    const vram = allow === null && random() < 0.1 ? 40 : null;
    const region = random() < 0.33 ? pick(REGIONS).key : null;
    jobs.push({
      gpuCount: gpus,
      capMicroUsd: 10_000_000,
      spec: {
        image: images ? benchImageName(Math.floor(imageOf() * BENCH_IMAGES)) : 'busybox',
        command: ['sh', '-c', 'nvidia-smi'],
        gpu: { count: gpus, ...(allow ? { modelAllowlist: allow } : {}), ...(vram ? { minimumVramGb: vram } : {}) },
        ...(region ? { regionPreference: region } : {}),
      },
    });
  }
  return jobs;
}

interface RunFigures {
  matched: number;
  seconds: number;
  passes: number;
  gpusTwice: number;
  inconsistent: number;
  /** Jobs left QUEUED although some machine still has free GPUs that fit them: a matcher miss. */
  missedFits: number;
  /** The jobs left QUEUED, by what they ask (`<count>x <allowlist or any>`). */
  left: Map<string, number>;
}

/** Runs `matchers` matchers (each its own connection pool, as replicas) until no job is left or no pass matches any more. */
async function timeMatching(url: string, matchers: number): Promise<RunFigures> {
  const pools = Array.from({ length: matchers }, () => openPostgres(url));
  try {
    const started = performance.now();
    let matched = 0;
    let passes = 0;
    for (;;) {
      passes += 1;
      const results = await Promise.all(pools.map((db) => matchQueuedJobs({ db }, { batchSize: BATCH, allowSimulated: true })));
      const got = results.reduce((n, r) => n + r.matched.length, 0);
      const contended = results.reduce((n, r) => n + r.contended, 0);
      matched += got;
      if (matched >= JOBS || (got === 0 && contended === 0) || passes >= 20) break;
    }
    const seconds = (performance.now() - started) / 1000;
    const db = pools[0]!;
    const [twice] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (
         SELECT a.machine_id, i FROM assignments a CROSS JOIN LATERAL unnest(a.gpu_indices) AS i GROUP BY 1, 2 HAVING count(*) > 1) AS d`,
    );
    // Every reserved GPU row names the assignment that lists it, and the other way round.
    const [inconsistent] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (
         SELECT a.machine_id, i FROM assignments a CROSS JOIN LATERAL unnest(a.gpu_indices) AS i
         LEFT JOIN machine_gpus g ON g.machine_id = a.machine_id AND g.gpu_index = i AND g.assignment_id = a.id AND g.busy
         WHERE g.machine_id IS NULL) AS d`,
    );
    const [jobsMatched] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM jobs WHERE status = 'MATCHING'`);
    const [missedFits] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM jobs j WHERE j.status = 'QUEUED' AND EXISTS (
         SELECT 1 FROM machine_gpus g JOIN machines m ON m.id = g.machine_id JOIN farms f ON f.id = m.farm_id
         WHERE NOT g.busy AND g.assignment_id IS NULL AND m.status = 'online' AND NOT m.draining AND f.status = 'active'
           AND m.token_hash IS NOT NULL AND m.price_per_gpu_hour_micro_usd <= j.max_price_per_gpu_hour_micro_usd
           AND (m.workloads IS NULL OR j.workload_type = ANY (m.workloads))
           AND (j.spec -> 'gpu' -> 'modelAllowlist' IS NULL OR j.spec -> 'gpu' -> 'modelAllowlist' ? g.class_id)
           AND g.vram_bytes >= coalesce((j.spec -> 'gpu' ->> 'minimumVramGb')::float8 * 1073741824, 0)
         GROUP BY g.machine_id, g.class_id HAVING count(*) >= j.gpu_count)`,
    );
    const left = await db.query<{ ask: string; n: number }>(
      `SELECT j.gpu_count || 'x ' || coalesce(j.spec -> 'gpu' ->> 'modelAllowlist', 'any') ||
         coalesce(' >=' || (j.spec -> 'gpu' ->> 'minimumVramGb') || 'GiB', '') AS ask, count(*)::int AS n
       FROM jobs j WHERE j.status = 'QUEUED' GROUP BY 1 ORDER BY 2 DESC`,
    );
    return {
      matched: jobsMatched!.n,
      seconds,
      passes,
      gpusTwice: twice!.n,
      inconsistent: inconsistent!.n,
      missedFits: missedFits!.n,
      left: new Map(left.map((r) => [r.ask, r.n])),
    };
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
}

/** Puts every job back in the queue and frees what the run reserved, for the next run. */
async function resetRun(db: Database): Promise<void> {
  await db.exec(`
    DELETE FROM log_lines;
    UPDATE machine_gpus SET busy = false, assignment_id = NULL WHERE assignment_id IS NOT NULL;
    DELETE FROM job_phases;
    DELETE FROM assignments;
    UPDATE jobs SET status = 'QUEUED', assignment_id = NULL, attempts = 0, service_log_seq = 0;
  `);
  await db.exec('VACUUM ANALYZE jobs, machine_gpus, assignments, job_phases, log_lines');
}

/** A fresh database with the bench's fleet and queue (`BENCH_MATCH_MACHINES`, `BENCH_MATCH_JOBS`); the caller drops it. */
async function prepareDatabase(log: (line: string) => void, images = false): Promise<BenchDatabase> {
  const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';
  const database = await createBenchDatabase(serverUrl);
  try {
    const db = openPostgres(database.url);
    let freeGpus = 0;
    try {
      await migrate(db);
      await syncCatalog(db);
      const seeded = await seedFleet(db, { machines: MACHINES });
      // Every machine has an enrolled agent (a machine token), as the matcher requires.
      await db.query('UPDATE machines SET token_hash = md5(id)');
      const [free] = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM machine_gpus g JOIN machines m ON m.id = g.machine_id
         WHERE NOT g.busy AND m.status = 'online' AND m.price_per_gpu_hour_micro_usd IS NOT NULL`,
      );
      freeGpus = free!.n;
      const owner = await createJobOwner(db);
      if (images) await reportImages(db, log);
      const jobs = queue(JOBS, images);
      for (let i = 0; i < jobs.length; i += 5_000) await createQueuedJobs(db, owner, jobs.slice(i, i + 5_000));
      await db.exec('VACUUM ANALYZE jobs, machines');
      const demand = jobs.reduce((n, j) => n + (j.gpuCount ?? 1), 0);
      log(`database ${database.name}: ${seeded.machines} machines with agents (${freeGpus} free offered GPUs), ${JOBS} QUEUED funded jobs asking for ${demand} GPUs; batches of ${BATCH}`);
    } finally {
      await db.close();
    }
  } catch (err) {
    await database.drop();
    throw err;
  }
  return database;
}

/** Images the jobs of the image-aware run name, and how many of them each machine holds. */
const BENCH_IMAGES = 50;
const IMAGES_PER_MACHINE = 5;

/** Every machine's agent reports `IMAGES_PER_MACHINE` of the bench images, through the gateway's own writer. */
async function reportImages(db: Database, log: (line: string) => void): Promise<void> {
  const random = mulberry32(9);
  const machines = await db.query<{ id: string }>('SELECT id FROM machines ORDER BY id');
  for (const { id } of machines) {
    const held = new Set<number>();
    while (held.size < IMAGES_PER_MACHINE) held.add(Math.floor(random() * BENCH_IMAGES));
    await writeImageReport(db, id, benchImageReport([...held].map((image, i) => ({ image, usedAt: Date.parse('2026-11-01T00:00:00Z') + i * 1000 }))));
  }
  log(`every machine reports ${IMAGES_PER_MACHINE} of ${BENCH_IMAGES} images; every job names one of them`);
}

/**
 * The matching bench's time per job with one matcher (seconds per matched job), on a database
 * of its own: the reference other sections compare the matcher against in the same run. With
 * `images`, every machine's agent has reported the images it holds and every job names one, so
 * the matcher weighs who holds each job's image (image-aware matching) on every pass.
 */
export async function matchingSecondsPerJob(log: (line: string) => void, options: { images?: boolean } = {}): Promise<number> {
  const database = await prepareDatabase(log, options.images ?? false);
  try {
    const one = await timeMatching(database.url, 1);
    log(`matching bench (one matcher${options.images ? ', image reports' : ''}): ${one.matched} jobs in ${one.seconds.toFixed(2)} s`);
    return one.seconds / Math.max(1, one.matched);
  } finally {
    await database.drop();
  }
}

async function run(log: (line: string) => void): Promise<StandaloneResult> {
  const database = await prepareDatabase(log);
  try {
    const one = await timeMatching(database.url, 1);
    const reset = openPostgres(database.url);
    try {
      await resetRun(reset);
    } finally {
      await reset.close();
    }
    const two = await timeMatching(database.url, 2);

    const row = (label: string, r: RunFigures) => {
      const pass = r.matched === JOBS && r.seconds <= TARGET_SECONDS && r.gpusTwice === 0 && r.inconsistent === 0;
      return [label, `${r.matched}/${JOBS}`, r.seconds.toFixed(2), (r.matched / r.seconds).toFixed(0), String(r.passes), String(r.gpusTwice), `all within ${TARGET_SECONDS} s, no GPU twice`, pass ? 'PASS' : 'FAIL'];
    };
    const rows = [
      ['matcher', 'matched', 'seconds', 'jobs/s', 'passes', 'GPUs given twice', 'target', 'result'],
      row('one matcher', one),
      row('two matchers at once (two pools, as replicas)', two),
    ];
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    const table = rows.map((r, n) => r.map((c, i) => (i >= 1 && i <= 5 && n > 0 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd());
    table.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
    for (const [label, r] of [['one matcher', one], ['two matchers', two]] as const) {
      if (r.left.size === 0) continue;
      const asks = [...r.left].map(([ask, n]) => `${n} of ${ask}`).join(', ');
      table.push(`${label}: left QUEUED ${asks}; of them ${r.missedFits} had a fitting machine with free GPUs left`);
    }
    if (one.inconsistent + two.inconsistent > 0) table.push(`GPU rows not naming their assignment: ${one.inconsistent} (one), ${two.inconsistent} (two)`);
    const missed = [one, two].flatMap((r, i) =>
      r.matched === JOBS && r.seconds <= TARGET_SECONDS && r.gpusTwice === 0 && r.inconsistent === 0
        ? []
        : [`matching (${i === 0 ? 'one matcher' : 'two matchers'}): ${r.matched}/${JOBS} jobs in ${r.seconds.toFixed(2)} s, ${r.gpusTwice} GPUs given twice`],
    );
    return { table, missed };
  } finally {
    await database.drop();
  }
}

/**
 * Matching throughput: a fresh database with `BENCH_MATCH_MACHINES` (10,000) seeded
 * machines, every one with an agent, and `BENCH_MATCH_JOBS` (10,000) QUEUED funded jobs
 * inserted directly; the time until every job is matched, by one matcher and then (after
 * putting the jobs back) by two at once, and the check that no GPU was given twice.
 * Target: all matched within 10 s on this machine.
 */
export const matchingSection: StandaloneSection = { name: 'matching', run };
