import { randomBytes } from 'node:crypto';
import { findGpuClass, findRegion, type BenchmarkTier } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';
import { newId } from '../ids.js';

/**
 * Factories that insert real fleet rows: farms, machines with their GPUs and 30-day uptime.
 * Tests build the fleet they need with them; the seed (`seed.ts`) uses the same uptime writer.
 */

const DAY_MS = 86_400_000;

export type FarmStatus = 'active' | 'suspended';
export type MachineStatus = 'online' | 'offline' | 'unhealthy' | 'draining' | 'disabled';

export interface FarmInput {
  /** Default: `farm-` and 8 random hex digits. */
  slug?: string;
  /** Default: derived from the slug. */
  name?: string;
  /** The company operating the farm. Default `Test Provider`. */
  provider?: string;
  status?: FarmStatus;
  /** Where its earnings are released (any case); default none. */
  payoutAddress?: string | null;
}

export interface Farm {
  id: string;
  slug: string;
  name: string;
  provider: string;
  status: FarmStatus;
  payoutAddress: string | null;
}

/** Inserts a farm. */
export async function createFarm(db: Queryable, input: FarmInput = {}): Promise<Farm> {
  const slug = input.slug ?? `farm-${randomBytes(4).toString('hex')}`;
  const farm: Farm = {
    id: newId('farm'),
    slug,
    name: input.name ?? slug.split('-').map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join(' '),
    provider: input.provider ?? 'Test Provider',
    status: input.status ?? 'active',
    payoutAddress: input.payoutAddress?.toLowerCase() ?? null,
  };
  await db.query('INSERT INTO farms (id, slug, name, provider, status, payout_address) VALUES ($1, $2, $3, $4, $5, $6)', [
    farm.id,
    farm.slug,
    farm.name,
    farm.provider,
    farm.status,
    farm.payoutAddress,
  ]);
  return farm;
}

export interface MachineInput {
  farmId: string;
  regionKey: string;
  /** GPU class id from the catalog. */
  classId: string;
  gpuCount: number;
  /** Default `verified` (a machine of the catalog's fleet; enrolled machines start `unverified`). */
  verification?: 'unverified' | 'verifying' | 'verified' | 'failed';
  /** How many of the GPUs are busy (the first ones). Default 0. */
  busyGpus?: number;
  /** null: online but not offered. */
  pricePerGpuHourMicroUsd: number | null;
  /** Default 60. */
  minBillingSeconds?: number;
  /** Default `A`; null for a machine not benchmarked yet. */
  benchmarkTier?: BenchmarkTier | null;
  /** Default `12.4`. */
  cudaVersion?: string | null;
  /** Default `550.54.15`. */
  driverVersion?: string | null;
  /** Default `online`. */
  status?: MachineStatus;
  /** Workload types accepted; null (the default) accepts every type. */
  workloads?: string[] | null;
  /** Default false. */
  simulated?: boolean;
  /** Its last passed GPU challenge (`proven_at`); default null: not proven. */
  provenAt?: Date | null;
  /**
   * The 30-day uptime to record, in percent: writes `machine_uptime_days` rows for the days
   * since `max(createdAt, now - 30 days)` that give this uptime. Default 100; null writes none.
   */
  uptimePct?: number | null;
  /** Default 30 days ago, so the uptime covers a full window. */
  createdAt?: Date;
}

export interface Machine {
  id: string;
  farmId: string;
  regionKey: string;
  classId: string;
  gpuCount: number;
}

/** Inserts a machine, its GPUs and its uptime days in one transaction. */
export async function createMachine(db: Database, input: MachineInput): Promise<Machine> {
  const gpuClass = findGpuClass(input.classId);
  if (!gpuClass) throw new Error(`unknown GPU class ${input.classId}`);
  if (!findRegion(input.regionKey)) throw new Error(`unknown region ${input.regionKey}`);
  if (!Number.isInteger(input.gpuCount) || input.gpuCount < 1) throw new Error('gpuCount must be a positive integer');
  const busy = input.busyGpus ?? 0;
  if (busy < 0 || busy > input.gpuCount) throw new Error('busyGpus must be between 0 and gpuCount');
  const id = newId('mach');
  const now = new Date();
  const createdAt = input.createdAt ?? new Date(now.getTime() - 30 * DAY_MS);
  const status = input.status ?? 'online';
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO machines (id, farm_id, region_key, status, price_per_gpu_hour_micro_usd, min_billing_seconds, benchmark_tier,
         cuda_version, driver_version, workloads, simulated, last_heartbeat_at, created_at, updated_at, verification, verified_at, proven_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14, $13, $15)`,
      [
        id,
        input.farmId,
        input.regionKey,
        status,
        input.pricePerGpuHourMicroUsd,
        input.minBillingSeconds ?? 60,
        input.benchmarkTier === undefined ? 'A' : input.benchmarkTier,
        input.cudaVersion === undefined ? '12.4' : input.cudaVersion,
        input.driverVersion === undefined ? '550.54.15' : input.driverVersion,
        input.workloads ?? null,
        input.simulated ?? false,
        status === 'online' ? now : null,
        createdAt,
        input.verification ?? 'verified',
        input.provenAt ?? null,
      ],
    );
    await tx.query(
      `INSERT INTO machine_gpus (machine_id, gpu_index, class_id, vram_bytes, busy)
       SELECT $1, i, $2, $3, i < $4 FROM generate_series(0, $5::int - 1) AS i`,
      [id, gpuClass.classId, gpuClass.vramBytes, busy, input.gpuCount],
    );
    const uptimePct = input.uptimePct === undefined ? 100 : input.uptimePct;
    if (uptimePct !== null) await insertUptimeDays(tx, [{ machineId: id, uptimePct, createdAt }], now);
  });
  return { id, farmId: input.farmId, regionKey: input.regionKey, classId: gpuClass.classId, gpuCount: input.gpuCount };
}

export interface UptimeTarget {
  machineId: string;
  /** 0-100. */
  uptimePct: number;
  createdAt: Date;
  /**
   * 0 (the default) spreads the uptime evenly over the days; up to 1 varies it from day to day
   * (each day still within its own length), deterministically per machine and day.
   */
  jitter?: number;
  /** Varies the jitter's phase between machines. */
  phase?: number;
}

/**
 * Writes the `machine_uptime_days` rows that give each machine its 30-day uptime as of `now`:
 * for every UTC day overlapping `[max(createdAt, now - 30 days), now]`, the uptime share of
 * the seconds of that day inside the window. One statement for all machines.
 */
export async function insertUptimeDays(db: Queryable, targets: readonly UptimeTarget[], now: Date): Promise<void> {
  if (targets.length === 0) return;
  for (const t of targets) {
    if (!(t.uptimePct >= 0 && t.uptimePct <= 100)) throw new Error(`uptimePct must be between 0 and 100, got ${t.uptimePct}`);
  }
  await db.query(
    `INSERT INTO machine_uptime_days (machine_id, day, seconds_up)
     SELECT m.id, d.day::date,
       least(d.secs, greatest(0, round(d.secs * m.pct / 100 * (1 + m.jitter * sin(extract(epoch FROM d.day) / 86400 * 2.3 + m.phase)))))::int
     FROM unnest($1::text[], $2::float8[], $3::timestamptz[], $4::float8[], $5::float8[]) AS m(id, pct, created_at, jitter, phase)
     CROSS JOIN LATERAL (
       SELECT day, extract(epoch FROM least(day + interval '1 day', w.now_utc) - greatest(day, w.start_utc)) AS secs
       FROM (SELECT $6::timestamptz AT TIME ZONE 'UTC' AS now_utc,
                    greatest(m.created_at, $6::timestamptz - interval '30 days') AT TIME ZONE 'UTC' AS start_utc) AS w,
            generate_series(date_trunc('day', w.start_utc), date_trunc('day', w.now_utc), interval '1 day') AS day
     ) AS d
     WHERE d.secs > 0`,
    [
      targets.map((t) => t.machineId),
      targets.map((t) => t.uptimePct),
      targets.map((t) => t.createdAt.toISOString()),
      targets.map((t) => t.jitter ?? 0),
      targets.map((t) => t.phase ?? 0),
      now,
    ],
  );
}

export interface ChallengeInput {
  machineId: string;
  /** Default `passed`. */
  state?: 'preparing' | 'running' | 'opening' | 'passed' | 'failed';
  /** Default `enrollment`. */
  cause?: 'enrollment' | 'claims_changed' | 'retry' | 'idle';
  /** Why it failed (state `failed`). Default "the commitment came after the deadline". */
  reason?: string;
  /** The class whose window it is held to; null (simulated) has no window. Default `rtx-4090-24gb`. */
  classId?: string | null;
  /** How many GPUs it ran on. Default 1. */
  gpuCount?: number;
}

/**
 * A GPU challenge row as `machine-verification/challenge-store.ts` leaves it (16 rows opened per
 * GPU once committed), and the machine's verification as that challenge leaves it: `verifying`
 * while open, `verified` and proven (real GPUs) once passed, `failed` with its reason.
 */
export async function createChallenge(db: Database, input: ChallengeInput): Promise<{ id: string }> {
  const id = newId('chl');
  const state = input.state ?? 'passed';
  const classId = input.classId === undefined ? 'rtx-4090-24gb' : input.classId;
  const gpus = Array.from({ length: input.gpuCount ?? 1 }, (_, index) => ({ index, uuid: `GPU-${randomBytes(16).toString('hex')}` }));
  const went = state !== 'preparing';
  const committed = went && state !== 'running';
  const finished = state === 'passed' || state === 'failed';
  const reason = state === 'failed' ? (input.reason ?? 'the commitment came after the deadline') : null;
  const opened = committed ? gpus.flatMap((g) => Array.from({ length: 16 }, (_, i) => ({ uuid: g.uuid, round: i * 7, row: i * 1000 + 3 }))) : null;
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO gpu_challenges (id, machine_id, cause, state, simulated, class_id, m, n, k, rounds, checks, expected_seconds, deadline_seconds,
         gpus, pre_seed, go_seed, roots, gpu_seconds, opened, elapsed_ms, check_ms, reason, created_at, go_at, committed_at, finished_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 4096, 4096, $8, 16, $9, $10, $11::jsonb, $12, $13, $14::jsonb, $15::jsonb, $16::jsonb, $17, $18, $19,
         now() - interval '10 seconds', CASE WHEN $20 THEN now() - interval '8 seconds' END, CASE WHEN $21 THEN now() - interval '3 seconds' END,
         CASE WHEN $22 THEN now() - interval '2 seconds' END)`,
      [
        id, input.machineId, input.cause ?? 'enrollment', state, classId === null, classId,
        classId === null ? 256 : 65_536, classId === null ? 4 : 1_200, classId === null ? null : 5, classId === null ? null : 9.3,
        JSON.stringify(gpus), randomBytes(32).toString('hex'), went ? randomBytes(32).toString('hex') : null,
        committed ? JSON.stringify(Object.fromEntries(gpus.map((g) => [g.uuid, randomBytes(32).toString('hex')]))) : null,
        committed ? JSON.stringify(Object.fromEntries(gpus.map((g) => [g.uuid, 4.8]))) : null,
        opened === null ? null : JSON.stringify(opened), committed ? 5_012 : null, finished ? 310 : null, reason, went, committed, finished,
      ],
    );
    await tx.query(
      `UPDATE machines SET challenge_id = $2, verification = $3, verification_reason = $4,
              verified_at = CASE WHEN $3 = 'verified' THEN now() ELSE verified_at END,
              proven_at = CASE WHEN $3 = 'verified' AND NOT simulated THEN now() ELSE proven_at END,
              next_challenge_at = CASE WHEN $3 = 'verified' THEN now() + interval '18 hours' ELSE next_challenge_at END
        WHERE id = $1`,
      [input.machineId, id, state === 'passed' ? 'verified' : state === 'failed' ? 'failed' : 'verifying', reason === null ? null : `GPU challenge ${id} failed: ${reason}`],
    );
  });
  return { id };
}
