import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { migrate, openPostgres } from '@gpufarm/control-plane/db';
import { loadConfig } from '@gpufarm/control-plane/config';
import { syncCatalog } from '@gpufarm/control-plane/fleet';
import { seedFleet } from '@gpufarm/control-plane/testing';
import { capacitySection } from './bench/capacity.js';
import { localChainEnv, startLocalChain } from './chain/local-chain.js';
import { createBenchDatabase } from './bench/database.js';
import { jobsSection, type JobsSectionContext } from './bench/jobs.js';
import { formatTable, markdownTable, verdict, type BenchRow } from './bench/report.js';
import { startControlPlaneProcess } from './bench/server.js';
import { STANDALONE_SECTIONS } from './bench/standalone.js';
import { matchingSection } from './bench/matching.js';
import { logLatencySection } from './bench/log-latency.js';
import { artifactDownloadSection } from './bench/artifact-download.js';
import { clientColdStartSection } from './bench/client-cold-start.js';
import { replicasSection } from './bench/replicas.js';
import { dashboardSection } from './bench/dashboard.js';
import { BENCH_METRICS_TOKEN, metricsSection } from './bench/metrics.js';
import { fleetSection } from './bench/fleet.js';
import { gpuChallengeSection } from './bench/gpu-challenge.js';
import { startupPullSection } from './bench/startup-pull.js';
import { startupMatchingSection } from './bench/startup-matching.js';
import { rateLimitStoreSection, type RateLimitStoreSectionContext } from './bench/rate-limit-store.js';
import { errorText } from '@gpufarm/shared';

/**
 * `npm run bench`: seeds a fresh PostgreSQL database with a simulated fleet, starts the control
 * plane as a separate process on it, and measures endpoints with autocannon, rate limiting on.
 * Each section (`bench/*.ts`) returns table rows; later issues add sections. The endpoint table
 * is printed twice: aligned for reading, and as the markdown rows of docs/benchmarks.md with the commit,
 * date and load average of the run, to be pasted as they are.
 *
 * `npm run bench -- --only capacity` (words, comma-separated or repeated) measures the baseline
 * and only the rows and sections whose label or name holds one of the words; BENCH_SECTIONS
 * gives words the same way.
 *
 * Environment: BENCH_DATABASE_URL (a server where the role may create databases), BENCH_MACHINES
 * (10000), BENCH_DURATION (seconds per endpoint, 10), BENCH_WARMUP (2), BENCH_CONNECTIONS (50),
 * BENCH_JOB_KEYS (API keys for the job creation section; default: enough for 5,000 creations/s),
 * BENCH_SECTIONS (comma-separated words of rows or sections to run besides the baseline),
 * BENCH_STORE_ROUNDS (rounds of each rate-limit store in turn, 3), BENCH_CPU_PROFILE_DIR (the
 * server writes a V8 CPU profile there).
 */
const SECTIONS: Array<{ name: string; run: (ctx: JobsSectionContext & RateLimitStoreSectionContext) => Promise<BenchRow[]> }> = [
  { name: 'public read endpoints', run: capacitySection },
  // `GET /v1` with shared limits (Redis) beside the baseline's memory store (BENCH_SECTIONS=redis).
  { name: 'rate limits in redis', run: rateLimitStoreSection },
  { name: 'job creation', run: jobsSection },
  // The cost of a Prometheus scrape at the seeded fleet (BENCH_SECTIONS=metrics).
  { name: 'metrics scrape', run: metricsSection },
];
// Matching throughput, on its own fresh database (BENCH_SECTIONS=matching).
STANDALONE_SECTIONS.push(matchingSection);
// End-to-end log latency and artifact download, each on a marketplace of its own (BENCH_SECTIONS=latency,artifact).
STANDALONE_SECTIONS.push(logLatencySection, artifactDownloadSection);
// The installable client's `gf --version` beside `node -e 0` (BENCH_SECTIONS=gf).
STANDALONE_SECTIONS.push(clientColdStartSection);
// One and two replicas behind HAProxy, and failover of the agent link (BENCH_SECTIONS=replicas).
STANDALONE_SECTIONS.push(replicasSection);
// The dashboard in Chromium: first load, the job page with 1,000 lines, live lines on the page (BENCH_SECTIONS=dashboard).
STANDALONE_SECTIONS.push(dashboardSection);
// The admin area at 10,000 machines: overview and machines table p99, heartbeat ingest CPU, history bytes (BENCH_SECTIONS=fleet).
STANDALONE_SECTIONS.push(fleetSection);
// The server's CPU per GPU challenge check, and a simulated GPU's challenge (BENCH_SECTIONS=challenge).
STANDALONE_SECTIONS.push(gpuChallengeSection);
// A ~1 GiB image's job from funding to its first line, cold against warm, beside docker pull + run (BENCH_SECTIONS=startup).
STANDALONE_SECTIONS.push(startupPullSection);
// Image-aware matching on a simulated market of 100 machines: warm starts with and without it, and the matcher's time per job (BENCH_SECTIONS=startup).
STANDALONE_SECTIONS.push(startupMatchingSection);

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

const cleanups: Array<() => Promise<void>> = [];
async function cleanUp(): Promise<void> {
  while (cleanups.length > 0) await cleanups.pop()!().catch((err: unknown) => console.error(`bench: cleanup failed: ${errorText(err)}`));
}

/** The commit the bench runs, marked when the work tree differs from it; `unknown` outside git. */
function commitDescription(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const changed = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
    return changed ? `${commit} with uncommitted changes` : commit;
  } catch {
    return 'unknown';
  }
}

/** The words of `--only` and BENCH_SECTIONS; undefined when neither names any (run everything). */
function selectedWords(): string[] | undefined {
  const { values } = parseArgs({ options: { only: { type: 'string', multiple: true } }, strict: true });
  const words = [...(values.only ?? []), process.env.BENCH_SECTIONS ?? '']
    .flatMap((list) => list.split(','))
    .map((word) => word.trim())
    .filter(Boolean);
  return words.length > 0 ? words : undefined;
}

async function main(): Promise<number> {
  const only = selectedWords();
  const loadAtStart = loadavg()[0]!;
  const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';
  const machines = envInt('BENCH_MACHINES', 10_000);
  const durationSeconds = envInt('BENCH_DURATION', 10);
  const warmupSeconds = envInt('BENCH_WARMUP', 2);
  const connections = envInt('BENCH_CONNECTIONS', 50);
  const log = (line: string) => console.log(line);

  log(`gpufarm bench: ${cpus().length} cores, Node ${process.version}, ${machines} machines, ${connections} connections, ${durationSeconds} s per endpoint after ${warmupSeconds} s of warm-up`);
  const database = await createBenchDatabase(serverUrl);
  cleanups.push(() => database.drop());
  log(`database ${database.name} created`);

  const db = openPostgres(database.url);
  try {
    await migrate(db);
    await syncCatalog(db);
    const started = performance.now();
    const seeded = await seedFleet(db, { machines });
    log(`seeded ${seeded.machines} machines (${seeded.gpus} GPUs) on ${seeded.farms} farms in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    await db.close();
  }

  // The local chain of npm start, so job creation fixes escrow terms and funding calls as it does there.
  const chainDir = mkdtempSync(join(tmpdir(), 'gf-bench-chain-'));
  cleanups.push(async () => rmSync(chainDir, { recursive: true, force: true }));
  const chain = await startLocalChain({ dataDir: chainDir, chainId: loadConfig().chainId, challengeWindowSeconds: 3600 });
  cleanups.push(() => chain.anvil.stop());
  log(`local chain at ${chain.anvil.rpcUrl}, escrow ${chain.deployment.escrow}`);

  const startServer = (env: Record<string, string> = {}) =>
    startControlPlaneProcess({ databaseUrl: database.url, readyPath: '/v1/capacity?limit=1', env: { ...localChainEnv(chain), GF_METRICS_TOKEN: BENCH_METRICS_TOKEN, ...env } });
  // Rate limits in memory (the default; set, so that a GF_REDIS_URL around the bench does not count):
  // `rate limits in redis` starts a second control plane with them in Redis.
  const server = await startServer({ GF_RATE_LIMIT_STORE: 'memory' });
  cleanups.push(() => server.stop());
  log(`control plane pid ${server.pid} at ${server.url}`);

  let offers = 0;
  for (let cursor: string | null = '', i = 0; cursor !== null && i < 100; i++) {
    const page = (await (await fetch(`${server.url}/v1/capacity?limit=500${cursor ? `&cursor=${cursor}` : ''}`, { headers: { 'x-forwarded-for': '192.0.2.2' } })).json()) as { data: unknown[]; nextCursor: string | null };
    offers += page.data.length;
    cursor = page.nextCursor;
  }
  log(`${offers} capacity offers listed`);

  const rows: BenchRow[] = [];
  // `--only job` runs the baseline and the job creation row only.
  const wanted = (name: string) => !only || only.some((word) => name.includes(word));
  for (const section of SECTIONS) {
    const sectionWanted = wanted(section.name);
    const rowWanted = (label: string) => sectionWanted || wanted(label);
    // The heading appears with the section's first line: a section with no row selected prints nothing.
    let headed = false;
    const sectionLog = (line: string) => {
      if (!headed) log(`\n${section.name}:`);
      headed = true;
      log(line);
    };
    const baseline = rows.find((r) => r.baseline)?.result;
    rows.push(...(await section.run({ baseUrl: server.url, connections, durationSeconds, warmupSeconds, cpu: { serverPid: server.pid, database: database.name }, wanted: rowWanted, log: sectionLog, databaseUrl: database.url, baseline, startServer })));
  }
  const loadAtEnd = loadavg()[0]!;

  log(`\n${formatTable(rows)}\n`);
  log('docs/benchmarks.md rows (markdown):');
  log(markdownTable(rows).join('\n'));
  log(`run of ${commitDescription()} on ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores, Node ${process.version}, load average ${loadAtStart.toFixed(2)} at the start, ${loadAtEnd.toFixed(2)} at the end of the table's measurements\n`);
  const baseline = rows.find((r) => r.baseline);
  const missed = rows.filter((r) => verdict(r, baseline).pass === false).map((r) => r.label);
  // The standalone sections start what they measure: the table's control plane and chain, idle
  // but still working (sweeps, the matcher, blocks), would only weigh on their figures.
  await server.stop();
  await chain.anvil.stop();
  for (const section of STANDALONE_SECTIONS) {
    if (!wanted(section.name)) continue;
    log(`\n${section.name}:`);
    const result = await section.run(log);
    log(`\n${result.table.join('\n')}\n`);
    missed.push(...result.missed);
  }
  const broken = rows.filter((r) => r.result.non2xx > 0 || r.result.errors > 0 || r.result.timeouts > 0);
  for (const row of broken) {
    log(`${row.label}: ${row.result.non2xx} non-2xx responses, ${row.result.errors} errors, ${row.result.timeouts} timeouts; status codes ${JSON.stringify(row.result.statusCodes)}`);
  }
  log(broken.length > 0 ? 'INVALID: some responses were not 2xx (see above)' : `every response was 2xx (${rows.reduce((n, r) => n + r.result.requests, 0)} requests, rate limiting on)`);
  log(missed.length > 0 ? `targets missed: ${missed.join('; ')}` : 'all targets met');
  return broken.length > 0 ? 1 : 0;
}

// Ctrl-C, and the SIGTERM that `timeout` and job runners send: the control plane and the other
// processes the bench started end with it.
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
  process.once(signal, () => {
    void cleanUp().finally(() => process.exit(code));
  });
}

main()
  .then(async (code) => {
    await cleanUp();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    console.error(`bench failed: ${errorText(err)}`);
    await cleanUp();
    process.exit(1);
  });
