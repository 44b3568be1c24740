import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { WebSocket } from 'ws';
import { AGENT_PROTOCOL_VERSION, AGENT_PROTOCOL_VERSIONS, AGENT_WS_PATH, type MachineInventory } from '@gpufarm/shared';
import { createWebSession, ensureAccount, hashAgentToken, newAgentToken } from '@gpufarm/control-plane/auth';
import { type Database, migrate, openPostgres } from '@gpufarm/control-plane/db';
import { seedFleet } from '@gpufarm/control-plane/testing';
import { syncCatalog } from '@gpufarm/control-plane/fleet';
import { processCpuSeconds } from './cpu.js';
import { createBenchDatabase } from './database.js';
import { HEARTBEAT_SECONDS, type Link, startBareBaseline, startBeating, stopLinks } from './heartbeat-links.js';
import { startControlPlaneProcess } from './server.js';
import type { StandaloneResult, StandaloneSection } from './standalone.js';

/**
 * The admin area at fleet scale, on PostgreSQL: BENCH_FLEET_MACHINES (10,000) seeded machines
 * with 7 days of fleet figures and events, and 7 days of GPU history (15-minute rows, the last
 * 48 h also per minute) for BENCH_FLEET_HISTORY_MACHINES (200) of them; the control plane as
 * its own process.
 * - p99 of `GET /admin/api/fleet/overview` and `GET /admin/api/machines` (a few filters and
 *   sorts), from 4 concurrent clients on admin sessions: target <= 200 ms;
 * - heartbeat ingest: BENCH_FLEET_LINKS (10,000) real agent WebSockets each sending a heartbeat
 *   every 10 s (the first with GPU health reports, as a protocol 4 agent sends them); the
 *   control plane's CPU over 60 s as a share of one core: target <= 10%; over the same 60 s,
 *   beside it, a bare `ws` server that only JSON-parses the same heartbeats from as many links,
 *   the transport's own share, and the ingest's ratio to it: target <= 1.5 (measured at once,
 *   so that the machine's other work weighs on both alike); and, before the links open, the
 *   control plane's own background work with no link, for the reader;
 * - history storage per machine per day (pg_total_relation_size of the partitions / machines /
 *   days) and at steady state (48 h of minutes, 30 d of quarter hours).
 */

const MACHINES = Number(process.env.BENCH_FLEET_MACHINES ?? 10_000);
const HISTORY_MACHINES = Number(process.env.BENCH_FLEET_HISTORY_MACHINES ?? 200);
const LINKS = Number(process.env.BENCH_FLEET_LINKS ?? 10_000);
const REQUESTS = Number(process.env.BENCH_FLEET_REQUESTS ?? 300);
const INGEST_SECONDS = Number(process.env.BENCH_FLEET_INGEST_SECONDS ?? 60);
const TARGET_P99_MS = 200;
const TARGET_CPU_SHARE = 0.1;
const TARGET_RATIO_TO_BARE = 1.5;
/**
 * One admin account per session: a request counts against its session's bucket and against the
 * whole account's ceiling (600 a minute), so 7 paths x 310 calls from one account were refused
 * after the first 600 and measured the limiter instead of the pages.
 */
const ADMINS = Array.from({ length: 24 }, () => privateKeyToAddress(generatePrivateKey()).toLowerCase());

/** Seven days of fleet figures and events for every machine, and GPU history for the first `historyMachines`. */
async function seedHistory(db: Database, historyMachines: number): Promise<void> {
  await db.query(
    `INSERT INTO fleet_series_minute (bucket, machines_online, gpus_busy, jobs_queued, jobs_running)
     SELECT date_trunc('minute', now()) - make_interval(mins => n), 8000 + n % 500, 12000 + n % 3000, n % 200, 3000 + n % 700
       FROM generate_series(1, 7 * 1440) AS n`,
  );
  await db.query(
    `INSERT INTO fleet_events (at, type, machine_id, farm_id, message, details)
     SELECT now() - make_interval(secs => (random() * 7 * 86400)::int), (ARRAY['link.up', 'link.down', 'machine.unhealthy', 'machine.healthy', 'job.failed'])[1 + k % 5],
            m.id, m.farm_id, 'seeded event', '{}'::jsonb
       FROM machines m CROSS JOIN generate_series(1, 3) AS k`,
  );
  for (let day = -8; day <= 2; day += 1) {
    await db.query(`SELECT create_history_partition(t, (now() AT TIME ZONE 'UTC')::date + $1::int) FROM unnest(ARRAY['gpu_samples_minute', 'gpu_samples_15m']) AS t`, [day]);
  }
  const cells = `samples, util_sum, util_n, temp_sum, temp_max, temp_n, mem_sum, mem_max, mem_n, power_sum, power_max, power_n`;
  const values = (n: number) => `${n}, ${n} * 55.5, ${n}, ${n} * 61.2, 70.5, ${n}, ${n} * 12e9, 14e9, ${n}, ${n} * 250.5, 300.2, ${n}`;
  await db.query(
    `INSERT INTO gpu_samples_15m (machine_id, gpu_index, bucket, ${cells})
     SELECT g.machine_id, g.gpu_index, to_timestamp(floor(extract(epoch FROM now()) / 900) * 900) - make_interval(mins => 15 * q), ${values(90)}
       FROM (SELECT id FROM machines ORDER BY id LIMIT $1) m JOIN machine_gpus g ON g.machine_id = m.id CROSS JOIN generate_series(1, 7 * 96) AS q`,
    [historyMachines],
  );
  await db.query(
    `INSERT INTO gpu_samples_minute (machine_id, gpu_index, bucket, ${cells})
     SELECT g.machine_id, g.gpu_index, date_trunc('minute', now()) - make_interval(mins => q), ${values(6)}
       FROM (SELECT id FROM machines ORDER BY id LIMIT $1) m JOIN machine_gpus g ON g.machine_id = m.id CROSS JOIN generate_series(1, 2 * 1440) AS q`,
    [historyMachines],
  );
  // As heartbeats leave it: the mean utilization of each machine's GPUs (the table sorts by it).
  await db.query(`UPDATE machines SET gpu_utilization_percent = (abs(hashtext(id)) % 1000) / 10.0`);
  await db.query('ANALYZE');
}

async function historyBytes(db: Database): Promise<{ minute: number; quarter: number }> {
  const [row] = await db.query<{ minute: string; quarter: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)) FILTER (WHERE i.inhparent = 'gpu_samples_minute'::regclass), 0)::text AS minute,
            coalesce(sum(pg_total_relation_size(i.inhrelid)) FILTER (WHERE i.inhparent = 'gpu_samples_15m'::regclass), 0)::text AS quarter
       FROM pg_inherits i WHERE i.inhparent IN ('gpu_samples_minute'::regclass, 'gpu_samples_15m'::regclass)`,
  );
  return { minute: Number(row?.minute ?? 0), quarter: Number(row?.quarter ?? 0) };
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

/** p50 and p99 of `path` over REQUESTS calls from 4 clients, round-robin over the sessions (each under its rate limits). */
async function latency(baseUrl: string, path: string, cookies: readonly string[]): Promise<{ p50: number; p99: number; failed: number }> {
  const times: number[] = [];
  let failed = 0;
  let next = 0;
  const call = async (record: boolean) => {
    const cookie = cookies[next++ % cookies.length]!;
    const started = performance.now();
    const res = await fetch(`${baseUrl}${path}`, { headers: { cookie: `gf_session=${cookie}` } });
    await res.arrayBuffer();
    if (!res.ok) failed += 1;
    if (record) times.push(performance.now() - started);
  };
  for (let i = 0; i < 10; i += 1) await call(false);
  let left = REQUESTS;
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (left-- > 0) await call(true);
  }));
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), failed };
}

function inventoryOf(gpus: ReadonlyArray<{ gpu_index: number; uuid: string; class_id: string; vram_bytes: number }>): MachineInventory {
  const now = new Date().toISOString();
  return {
    agentVersion: '0.1.0-bench',
    simulated: true,
    host: { cpuModel: 'Bench CPU', cpuCores: 32, cpuThreads: 64, ramBytes: 256 * 2 ** 30, diskFreeBytes: 2 * 2 ** 40, diskTotalBytes: 4 * 2 ** 40, os: 'Debian GNU/Linux 12', kernel: '6.1.0', arch: 'x64' },
    gpus: gpus.map((g) => ({
      index: g.gpu_index, uuid: g.uuid, name: g.class_id, classId: g.class_id, vramBytes: Number(g.vram_bytes), driverVersion: '550.54.15', cudaVersion: '12.4',
      temperatureC: null, utilizationPercent: null, memoryUsedBytes: null, powerDrawWatts: null, powerLimitWatts: null, simulated: true,
    })),
    detectedGpuCount: gpus.length,
    driverVersion: '550.54.15',
    cudaVersion: '12.4',
    health: { status: 'healthy', reason: null, gpuProbe: 'simulated', checkedAt: now },
    collectedAt: now,
  };
}

/** Why links the server closed were closed (`code reason` -> count), for the report. */
const closes = new Map<string, number>();

/** Opens `count` agent links (50 at a time), each through hello and welcome. */
async function openLinks(db: Database, baseUrl: string, count: number, log: (line: string) => void): Promise<Link[]> {
  // A disabled machine's token is refused, as an operator's switch-off means.
  const machines = await db.query<{ id: string }>(`SELECT id FROM machines WHERE status <> 'disabled' ORDER BY id LIMIT $1`, [count]);
  const tokens = machines.map(() => newAgentToken('gfa'));
  await db.query('UPDATE machines m SET token_hash = x.h FROM unnest($1::text[], $2::text[]) AS x(id, h) WHERE m.id = x.id', [machines.map((m) => m.id), tokens.map(hashAgentToken)]);
  const gpuRows = await db.query<{ machine_id: string; gpu_index: number; uuid: string; class_id: string; vram_bytes: number }>(
    'SELECT machine_id, gpu_index, uuid, class_id, vram_bytes FROM machine_gpus WHERE machine_id = ANY($1::text[]) ORDER BY machine_id, gpu_index',
    [machines.map((m) => m.id)],
  );
  const byMachine = new Map<string, typeof gpuRows>();
  for (const g of gpuRows) byMachine.set(g.machine_id, [...(byMachine.get(g.machine_id) ?? []), { ...g, uuid: g.uuid ?? `GPU-bench-${g.machine_id}-${g.gpu_index}` }]);
  const links: Link[] = [];
  const wsUrl = baseUrl.replace(/^http/, 'ws') + AGENT_WS_PATH;
  for (let i = 0; i < machines.length; i += 50) {
    const batch = machines.slice(i, i + 50).map(async (m, j) => {
      const gpus = byMachine.get(m.id) ?? [];
      const ws = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${tokens[i + j]}` } });
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => {
          ws.send(JSON.stringify({ type: 'hello', protocolVersion: AGENT_PROTOCOL_VERSION, supportedVersions: [...AGENT_PROTOCOL_VERSIONS], agentVersion: '0.1.0-bench', inventory: inventoryOf(gpus), benchmark: null, running: [], draining: false }));
        });
        ws.on('message', (data) => {
          if ((JSON.parse(data.toString()) as { type: string }).type === 'welcome') resolve();
        });
        ws.once('error', reject);
        ws.once('close', (code, reason) => reject(new Error(`link closed before welcome: ${code} ${reason.toString()}`)));
      });
      ws.removeAllListeners('close');
      ws.on('error', () => {});
      ws.on('close', (code, reason) => {
        const key = `${code} ${reason.toString().slice(0, 60)}`;
        closes.set(key, (closes.get(key) ?? 0) + 1);
      });
      const link: Link = { ws, gpus: gpus.map((g) => ({ index: g.gpu_index, uuid: g.uuid })), timer: null, reportedHealth: false };
      // Beating from its welcome on, as an agent does: a link silent for three intervals is closed.
      startBeating(link);
      links.push(link);
    });
    await Promise.all(batch);
    if ((i / 50) % 40 === 0) log(`    ${links.length} of ${machines.length} links up`);
  }
  return links;
}

export const fleetSection: StandaloneSection = {
  name: 'fleet',
  async run(log): Promise<StandaloneResult> {
    const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';
    const database = await createBenchDatabase(serverUrl);
    const db = openPostgres(database.url);
    const closers: Array<() => Promise<unknown>> = [() => database.drop(), () => db.close()];
    try {
      await migrate(db);
      await syncCatalog(db);
      const seeded = await seedFleet(db, { machines: MACHINES });
      await seedHistory(db, HISTORY_MACHINES);
      log(`  fleet: ${seeded.machines} machines (${seeded.gpus} GPUs), 7 days of figures and events; GPU history for ${HISTORY_MACHINES} machines`);
      const cookies: string[] = [];
      for (const admin of ADMINS) {
        const account = await ensureAccount(db, admin);
        cookies.push((await createWebSession(db, { accountId: account.id, walletAddress: admin, chainId: 4663, ttlSeconds: 3600, replacing: null })).cookie);
      }
      const server = await startControlPlaneProcess({ databaseUrl: database.url, readyPath: '/v1', env: { GF_ADMIN_WALLETS: ADMINS.join(','), GF_HEARTBEAT_SECONDS: String(HEARTBEAT_SECONDS), GF_MAX_CONNECTIONS: String(LINKS + 1000) } });
      closers.push(() => server.stop());

      const table: string[] = ['endpoint / figure                                            p50 ms   p99 ms   target          result'];
      const missed: string[] = [];
      const paths = [
        '/admin/api/fleet/overview?window=24h',
        '/admin/api/fleet/overview?window=7d',
        '/admin/api/machines',
        '/admin/api/machines?sort=utilization&order=desc&limit=100',
        '/admin/api/machines?state=offline&sort=failures',
        '/admin/api/machines?region=us-east&class=h100-80gb-sxm&sort=heartbeat_age&order=asc',
        `/admin/api/machines/${(await db.query<{ id: string }>('SELECT id FROM machines ORDER BY id LIMIT 1'))[0]!.id}/history?range=7d`,
      ];
      for (const path of paths) {
        log(`  GET ${path} ...`);
        const r = await latency(server.url, path, cookies);
        const pass = r.p99 <= TARGET_P99_MS && r.failed === 0;
        if (!pass) missed.push(`GET ${path}: p99 ${r.p99.toFixed(0)} ms${r.failed ? `, ${r.failed} failed` : ''} (target <= ${TARGET_P99_MS} ms)`);
        table.push(`GET ${path}`.padEnd(60) + r.p50.toFixed(1).padStart(9) + r.p99.toFixed(1).padStart(9) + `   p99 <= ${TARGET_P99_MS} ms`.padEnd(18) + (pass ? 'PASS' : 'FAIL'));
      }

      // The control plane's own background work (sweeps, matcher, history), with no link open: what the ingest row holds besides heartbeats.
      log(`  control plane with no agent links: measuring ${INGEST_SECONDS} s ...`);
      const idleCpu0 = processCpuSeconds(server.pid);
      const idleWall0 = performance.now();
      await new Promise((resolve) => setTimeout(resolve, INGEST_SECONDS * 1000));
      const idle = (processCpuSeconds(server.pid) - idleCpu0) / ((performance.now() - idleWall0) / 1000);

      log(`  heartbeat ingest: opening ${LINKS} agent links ...`);
      const links = await openLinks(db, server.url, LINKS, log);
      closers.push(async () => stopLinks(links));
      // Side by side, over the same seconds: what else the machine does weighs on both alike.
      log(`  baseline: a bare ws server, ${links.length} links with the same heartbeats ...`);
      const bare = await startBareBaseline(links.map((l) => l.gpus));
      closers.push(async () => bare.stop());
      log(`  heartbeat ingest: settling for ${2 * HEARTBEAT_SECONDS} s, then measuring ${INGEST_SECONDS} s ...`);
      await new Promise((resolve) => setTimeout(resolve, 2 * HEARTBEAT_SECONDS * 1000));
      const cpu0 = processCpuSeconds(server.pid);
      const bareCpu0 = processCpuSeconds(bare.pid);
      const wall0 = performance.now();
      await new Promise((resolve) => setTimeout(resolve, INGEST_SECONDS * 1000));
      const seconds = (performance.now() - wall0) / 1000;
      const share = (processCpuSeconds(server.pid) - cpu0) / seconds;
      const bareShare = (processCpuSeconds(bare.pid) - bareCpu0) / seconds;
      // A server that died meanwhile has no CPU figure to read: no baseline rather than a wrong one.
      if (!bare.alive()) throw new Error('the bare ws server or its links exited while measured');
      const open = links.filter((l) => l.ws.readyState === WebSocket.OPEN).length;
      const [heard] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM machines WHERE last_heartbeat_at > now() - interval '${HEARTBEAT_SECONDS * 2} seconds'`);
      if (closes.size > 0) log(`  links closed by the server: ${[...closes].map(([why, n]) => `${n} x ${why}`).join('; ')}`);
      const ingestPass = share <= TARGET_CPU_SHARE && open === links.length;
      if (!ingestPass) missed.push(`heartbeat ingest: ${(share * 100).toFixed(1)}% of a core with ${open} of ${links.length} links open (target <= ${TARGET_CPU_SHARE * 100}%)`);
      table.push(`heartbeat ingest, ${links.length} links every ${HEARTBEAT_SECONDS} s (${heard?.n ?? 0} heard in ${2 * HEARTBEAT_SECONDS} s)`.padEnd(60) + `${(share * 100).toFixed(1)}% of a core`.padStart(18) + `   <= ${TARGET_CPU_SHARE * 100}%`.padEnd(18) + (ingestPass ? 'PASS' : 'FAIL'));
      table.push(`the control plane with no agent links (background work), same run`.padEnd(60) + `${(idle * 100).toFixed(1)}% of a core`.padStart(18));
      table.push(`baseline: a bare ws server JSON-parsing the same heartbeats, same seconds`.padEnd(60) + `${(bareShare * 100).toFixed(1)}% of a core`.padStart(18));
      stopLinks(links);
      bare.stop();
      // Issue 30: the ingest at most 1.5 times the transport's own cost, both measured over the same seconds.
      const ratio = share / bareShare;
      const ratioPass = ratio <= TARGET_RATIO_TO_BARE;
      if (!ratioPass) missed.push(`heartbeat ingest: ${ratio.toFixed(2)} times the bare ws server's CPU (target <= ${TARGET_RATIO_TO_BARE})`);
      table.push(`heartbeat ingest / bare ws server`.padEnd(60) + `${ratio.toFixed(2)}x`.padStart(18) + `   <= ${TARGET_RATIO_TO_BARE}x`.padEnd(18) + (ratioPass ? 'PASS' : 'FAIL'));

      const bytes = await historyBytes(db);
      const minutePerDay = bytes.minute / HISTORY_MACHINES / 2;
      const quarterPerDay = bytes.quarter / HISTORY_MACHINES / 7;
      const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
      table.push(`history storage per machine per day: minute rows ${kib(minutePerDay)}, 15-minute rows ${kib(quarterPerDay)}`);
      table.push(`history storage per machine at steady state (48 h of minutes, 30 d of quarter hours): ${kib(minutePerDay * 2 + quarterPerDay * 30)}`);
      return { table, missed };
    } finally {
      for (const close of closers.reverse()) await close().catch((err: unknown) => log(`  fleet bench cleanup: ${(err as Error).message}`));
    }
  },
};
