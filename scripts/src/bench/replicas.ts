import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ANVIL_ACCOUNTS, REDIS_INSTALL_HINT, type RedisServerProcess, redisServerVersion, seedFleet, startRedisServer } from '@gpufarm/control-plane/testing';
import { loadConfig } from '@gpufarm/control-plane/config';
import { migrate, openPostgres } from '@gpufarm/control-plane/db';
import { syncCatalog } from '@gpufarm/control-plane/fleet';
import { randomBytes } from 'node:crypto';
import { localChainEnv, startLocalChain, type LocalChain } from '../chain/local-chain.js';
import { agentLinksByServer, haproxyVersion, HAPROXY_INSTALL_HINT, waitForServersUp } from '../cluster/haproxy.js';
import { startReplicaSet, type ReplicaSet } from '../cluster/replica-set.js';
import { LOCAL_SIMULATED_GPUS, readLocalImages, startLocalAgent } from '../local-agent.js';
import { processCpuSeconds } from './cpu.js';
import { createBenchDatabase } from './database.js';
import { jobsSection } from './jobs.js';
import { measure } from './load.js';
import { median, type BenchRow } from './report.js';
import type { StandaloneSection } from './standalone.js';
import { errorText } from '@gpufarm/shared';

const FILTERED = 'GET /v1/capacity?model=h100-80gb-sxm&region=europe-west&limit=20';
const FAILOVERS = Number(process.env.BENCH_FAILOVERS ?? 5);
/** Target: the agent's link is up on another replica within this long after its replica died. */
const FAILOVER_TARGET_MS = 5_000;

const envNumber = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);

interface Measured {
  replicas: number;
  rows: BenchRow[];
  /** HAProxy's CPU microseconds per request of each row. */
  haproxyUs: number[];
  /** Redis's (the shared rate limits') CPU microseconds per request of each row. */
  redisUs: number[];
}

/** The endpoints through HAProxy in front of `set`, CPU summed over its replicas. */
async function measureThrough(set: ReplicaSet, redis: RedisServerProcess, database: { url: string; name: string }, log: (line: string) => void): Promise<Measured> {
  const ctx = {
    baseUrl: set.url,
    connections: envNumber('BENCH_CONNECTIONS', 50),
    durationSeconds: envNumber('BENCH_DURATION', 10),
    warmupSeconds: envNumber('BENCH_WARMUP', 2),
    cpu: { serverPid: set.replicas.map((r) => r.child.pid), database: database.name },
    wanted: (label: string) => label === FILTERED || label === 'POST /v1/jobs',
    log,
  };
  const rows: BenchRow[] = [];
  const haproxyUs: number[] = [];
  const redisUs: number[] = [];
  const timed = async (run: () => Promise<BenchRow[]>) => {
    const before = { haproxy: processCpuSeconds(set.haproxy.pid), redis: processCpuSeconds(redis.pid) };
    const measured = await run();
    const seconds = { haproxy: processCpuSeconds(set.haproxy.pid) - before.haproxy, redis: processCpuSeconds(redis.pid) - before.redis };
    const requests = measured.reduce((n, r) => n + r.result.requests, 0);
    const perRequest = (cpu: number) => (requests > 0 ? (cpu * 1e6) / requests : 0);
    for (const row of measured) {
      rows.push(row);
      haproxyUs.push(perRequest(seconds.haproxy));
      redisUs.push(perRequest(seconds.redis));
    }
  };
  for (const label of ['GET /v1', FILTERED]) {
    log(`  ${label} ...`);
    await timed(async () => [{ label, result: await measure({ ...ctx, path: label.replace(/^GET /, '') }) }]);
  }
  await timed(() => jobsSection({ ...ctx, databaseUrl: database.url, baseline: rows[0]?.result }));
  return { replicas: set.replicas.length, rows, haproxyUs, redisUs };
}

/**
 * Kills (SIGKILL) the replica holding the agent's link `FAILOVERS` times and measures how long
 * until the agent's link is up on another, as the agent logs it ("link up") and HAProxy's
 * agents' backend shows it. The killed replica is started again before the next round.
 */
async function failovers(set: ReplicaSet, adminToken: string, dir: string, log: (line: string) => void): Promise<number[] | string> {
  const images = readLocalImages();
  if (!images) return 'no local images (.gpufarm/images.json): run bash scripts/test-env.sh (or npm start once) so a local agent can run';
  let linksUp = 0;
  const agent = await startLocalAgent({
    server: set.url,
    adminToken,
    stateDir: join(dir, 'agent'),
    payout: ANVIL_ACCOUNTS[2].address,
    simulateGpus: LOCAL_SIMULATED_GPUS,
    egressProxyImage: null,
    log: (line) => {
      if (/ link up: /.test(line)) linksUp++;
    },
  });
  const holder = async () => {
    for (let i = 0; i < 600; i++) {
      const held = [...(await agentLinksByServer(set.statsUrl))].filter(([, n]) => n > 0);
      if (held.length === 1) return set.replicas.find((r) => r.name === held[0]![0])!;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('no single replica holds the agent link');
  };
  const times: number[] = [];
  try {
    for (let round = 1; round <= FAILOVERS; round++) {
      const victim = await holder();
      const before = linksUp;
      const killedAt = performance.now();
      process.kill(victim.child.pid, 'SIGKILL');
      await victim.child.exited;
      while (linksUp === before) {
        if (performance.now() - killedAt > 60_000) throw new Error('the agent did not link again within 60 s');
        await new Promise((r) => setTimeout(r, 5));
      }
      const ms = performance.now() - killedAt;
      const now = await holder();
      if (now === victim) throw new Error(`the agent linked to ${victim.name} again, which was killed`);
      times.push(ms);
      log(`  failover ${round}: ${victim.name} killed, the link up on ${now.name} after ${(ms / 1000).toFixed(2)} s`);
      await victim.restart();
      await waitForServersUp(set.statsUrl);
    }
  } finally {
    await agent.stop();
  }
  return times;
}

/**
 * `POST /v1/jobs` and the filtered capacity query through HAProxy (scripts/src/cluster), with one
 * and with two control-plane replicas on one PostgreSQL database and their rate limits in one
 * Redis (as `npm run cluster` runs them), side by side: requests per
 * second and CPU per request summed over the replicas (on 2 cores, two replicas cannot serve
 * more; the CPU per request shows what a second replica costs). Then failover: the replica
 * holding an agent's link is killed and the time until the link is up on the other is measured.
 */
export const replicasSection: StandaloneSection = {
  name: 'replicas (one and two control planes behind HAProxy)',
  async run(log) {
    if (haproxyVersion() === null) return { table: [HAPROXY_INSTALL_HINT], missed: ['replicas: HAProxy missing'] };
    if (redisServerVersion() === null) return { table: [REDIS_INSTALL_HINT], missed: ['replicas: redis-server missing'] };
    const database = await createBenchDatabase(process.env.BENCH_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres');
    const dir = mkdtempSync(join(tmpdir(), 'gf-bench-replicas-'));
    let chain: LocalChain | null = null;
    let redis: RedisServerProcess | null = null;
    let set: ReplicaSet | null = null;
    try {
      const db = openPostgres(database.url);
      try {
        await migrate(db);
        await syncCatalog(db);
        const seeded = await seedFleet(db, { machines: envNumber('BENCH_MACHINES', 10_000) });
        log(`  seeded ${seeded.machines} machines in database ${database.name}`);
      } finally {
        await db.close();
      }
      chain = await startLocalChain({ dataDir: join(dir, 'chain'), chainId: loadConfig().chainId, challengeWindowSeconds: 3600 });
      redis = await startRedisServer({ dir });
      const adminToken = randomBytes(32).toString('base64url');
      const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: database.url, GF_LOG_LEVEL: 'warn', GF_CHAIN_FILE: '', GF_ADMIN_TOKEN: adminToken, GF_MIGRATE_ON_START: 'false', GF_REDIS_URL: redis.url, ...localChainEnv(chain) };
      const tails = new Map<string, string[]>();
      const keep = (name: string, line: string) => tails.set(name, [...(tails.get(name) ?? []), line].slice(-20));

      const measured: Measured[] = [];
      for (const count of [1, 2]) {
        log(`  ${count} replica(s) behind HAProxy`);
        set = await startReplicaSet({ count, dir: join(dir, `set-${count}`), env, keepClientForwardedFor: true, log: keep });
        // Each run warms its own processes; the capacity index loads at start.
        measured.push(await measureThrough(set, redis, database, log));
        if (count === 2) break;
        await set.stop();
        set = null;
      }

      const [one, two] = measured as [Measured, Measured];
      const table = ['| endpoint | replicas | req/s | p99 ms | replicas CPU µs/req | HAProxy CPU µs/req | PostgreSQL µs/req | Redis µs/req | CPU/req, 2 replicas ÷ 1 |', '|---|---|---|---|---|---|---|---|---|'];
      for (let i = 0; i < one.rows.length; i++) {
        for (const m of [one, two]) {
          const row = m.rows[i]!;
          const ratio = m === two ? (row.result.serverCpuUsPerRequest / one.rows[i]!.result.serverCpuUsPerRequest).toFixed(2) : '';
          table.push(`| \`${row.label}\` (through HAProxy) | ${m.replicas} | ${Math.round(row.result.requestsPerSecond).toLocaleString('en-US')} | ${row.result.p99Ms} | ${Math.round(row.result.serverCpuUsPerRequest)} | ${Math.round(m.haproxyUs[i]!)} | ${Math.round(row.result.postgresCpuUsPerRequest)} | ${Math.round(m.redisUs[i]!)} | ${ratio} |`);
        }
      }
      const broken = measured.flatMap((m) => m.rows).filter((r) => r.result.non2xx > 0 || r.result.errors > 0);
      for (const row of broken) table.push(`INVALID: ${row.label}: ${row.result.non2xx} non-2xx, ${row.result.errors} errors; status codes ${JSON.stringify(row.result.statusCodes)}`);

      const missed: string[] = broken.map((r) => `replicas: ${r.label} had errors`);
      const times = await failovers(set!, adminToken, dir, log).catch((err: unknown) => `failed: ${errorText(err)}`);
      if (typeof times === 'string') {
        table.push('', `failover: ${times}`);
        missed.push(`failover: ${times}`);
      } else {
        const max = Math.max(...times);
        const pass = max <= FAILOVER_TARGET_MS;
        table.push(
          '',
          '| failover | kills | median s | max s | target | result |',
          '|---|---|---|---|---|---|',
          `| SIGKILL of the replica holding the agent's link → link up on another (agent defaults: reconnect 0.5 s, doubling to 30 s) | ${times.length} | ${(median(times) / 1000).toFixed(2)} | ${(max / 1000).toFixed(2)} | ≤ ${FAILOVER_TARGET_MS / 1000} s | ${pass ? 'PASS' : 'FAIL'} |`,
        );
        if (!pass) missed.push(`failover: max ${(max / 1000).toFixed(2)} s > ${FAILOVER_TARGET_MS / 1000} s`);
      }
      table.push(`load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
      return { table, missed };
    } finally {
      await set?.stop();
      await redis?.stop();
      await chain?.anvil.stop();
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
