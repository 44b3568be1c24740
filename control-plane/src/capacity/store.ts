import { GPU_FAMILIES, type GpuClass, type GpuFamily } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';

/**
 * One row per (machine, GPU class; GPUs judged failed left out) of every machine that is online and verified (machine-verification) on an active farm, priced
 * or not, simulated ones only where the deployment allows them: the offer index's raw material.
 */
export interface FleetRow {
  machineId: string;
  farmId: string;
  farmSlug: string;
  farmName: string;
  provider: string;
  regionKey: string;
  classId: string;
  gpus: number;
  busy: number;
  /** null: the machine is online but not offered. */
  pricePerGpuHourMicroUsd: number | null;
  minBillingSeconds: number;
  benchmarkTier: string | null;
  cudaVersion: string | null;
  driverVersion: string | null;
  /** null: accepts every workload type. */
  workloads: string[] | null;
  simulated: boolean;
  /** The machine's `created_at`, epoch milliseconds: the uptime window starts no earlier. */
  createdAtMs: number;
  /** Its last passed GPU challenge on real GPUs (`proven_at`), epoch milliseconds; null: not proven. */
  provenAtMs: number | null;
}

interface FarmRecord {
  id: string;
  slug: string;
  name: string;
  provider: string;
}

interface MachineRecord {
  id: string;
  farmId: string;
  regionKey: string;
  price: number | string | bigint | null;
  minBillingSeconds: number;
  benchmarkTier: string | null;
  cudaVersion: string | null;
  driverVersion: string | null;
  workloads: string[] | null;
  simulated: boolean;
  createdAtMs: number;
  provenAtMs: number | null;
}

interface GpuGroupRecord {
  machineId: string;
  classId: string;
  gpus: number;
  busy: number;
}

/**
 * Reads the offered fleet. Three single-table statements joined here rather than one SQL join:
 * a join's plan depends on table statistics, which PGlite never gathers on its own and
 * PostgreSQL lacks right after a bulk insert, and a nested-loop plan over 10,000 machines
 * took tens of seconds. Each statement here is a scan (plus a GROUP BY for the GPUs) whatever
 * the statistics say.
 */
export async function loadFleetRows(db: Queryable, params: { allowSimulated: boolean }): Promise<FleetRow[]> {
  const [farms, machines, gpuGroups] = await Promise.all([
    db.query<FarmRecord>(`SELECT id, slug, name, provider FROM farms WHERE status = 'active'`),
    db.query<MachineRecord>(
      `SELECT id, farm_id AS "farmId", region_key AS "regionKey", price_per_gpu_hour_micro_usd AS price,
         min_billing_seconds AS "minBillingSeconds", benchmark_tier AS "benchmarkTier", cuda_version AS "cudaVersion",
         driver_version AS "driverVersion", workloads, simulated, (extract(epoch FROM created_at) * 1000)::float8 AS "createdAtMs",
         (extract(epoch FROM proven_at) * 1000)::float8 AS "provenAtMs"
       FROM machines WHERE status = 'online' AND verification = 'verified' AND NOT drain_requested AND NOT cordoned
         AND ($1::boolean OR NOT simulated)`,
      [params.allowSimulated],
    ),
    db.query<GpuGroupRecord>(
      `SELECT machine_id AS "machineId", class_id AS "classId", count(*)::int AS gpus, (count(*) FILTER (WHERE busy))::int AS busy
       FROM machine_gpus WHERE health <> 'failed' GROUP BY machine_id, class_id`,
    ),
  ]);
  const farmById = new Map(farms.map((f) => [f.id, f]));
  const machineById = new Map<string, { machine: MachineRecord; farm: FarmRecord }>();
  for (const machine of machines) {
    const farm = farmById.get(machine.farmId);
    if (farm) machineById.set(machine.id, { machine, farm });
  }
  const rows: FleetRow[] = [];
  for (const g of gpuGroups) {
    const found = machineById.get(g.machineId);
    if (!found) continue;
    const { machine: m, farm: f } = found;
    rows.push({
      machineId: m.id,
      farmId: f.id,
      farmSlug: f.slug,
      farmName: f.name,
      provider: f.provider,
      regionKey: m.regionKey,
      classId: g.classId,
      gpus: g.gpus,
      busy: g.busy,
      pricePerGpuHourMicroUsd: m.price === null ? null : Number(m.price),
      minBillingSeconds: m.minBillingSeconds,
      benchmarkTier: m.benchmarkTier,
      cudaVersion: m.cudaVersion,
      driverVersion: m.driverVersion,
      workloads: m.workloads,
      simulated: m.simulated,
      createdAtMs: m.createdAtMs,
      provenAtMs: m.provenAtMs,
    });
  }
  return rows;
}

/**
 * A GPU class as `gpu_classes` lists it: a curated one, or one derived when a machine first
 * reported it; its generation is text (a row written by another version may name one this
 * build does not know).
 */
export type ListedGpuClass = Pick<GpuClass, 'classId' | 'label' | 'model' | 'vendor' | 'family' | 'vramBytes' | 'origin'> & { architecture: string | null };

/** Every class `gpu_classes` lists, curated and derived, by id. */
export async function loadGpuClasses(db: Queryable): Promise<ListedGpuClass[]> {
  const rows = await db.query<Omit<ListedGpuClass, 'vendor' | 'vramBytes' | 'family'> & { family: string; vramBytes: string | number }>(
    `SELECT class_id AS "classId", label, model, family, vram_bytes AS "vramBytes", origin, architecture FROM gpu_classes ORDER BY class_id`,
  );
  const family = (text: string): GpuFamily => ((GPU_FAMILIES as readonly string[]).includes(text) ? (text as GpuFamily) : 'datacenter');
  return rows.map((r) => ({ ...r, vendor: 'nvidia', family: family(r.family), vramBytes: Number(r.vramBytes) }));
}

/** The first UTC day (`YYYY-MM-DD`) counted in the 30-day uptime as of `now`. */
export function uptimeWindowFirstDay(now: Date): string {
  return new Date(now.getTime() - UPTIME_WINDOW_MS).toISOString().slice(0, 10);
}

export const UPTIME_WINDOW_MS = 30 * 86_400_000;

/**
 * Seconds up per machine over the UTC days from `firstDay` on (`machine_uptime_days`, bounded
 * by its `day` index), for every machine or only `machineIds`. Machines without rows are absent.
 */
export async function loadUptimeSeconds(db: Queryable, firstDay: string, machineIds?: readonly string[]): Promise<Map<string, number>> {
  const rows = machineIds
    ? await db.query<{ machineId: string; seconds: number }>(
        `SELECT machine_id AS "machineId", sum(seconds_up)::float8 AS seconds FROM machine_uptime_days
         WHERE day >= $1::date AND machine_id = ANY($2::text[]) GROUP BY machine_id`,
        [firstDay, machineIds],
      )
    : await db.query<{ machineId: string; seconds: number }>(
        `SELECT machine_id AS "machineId", sum(seconds_up)::float8 AS seconds FROM machine_uptime_days
         WHERE day >= $1::date GROUP BY machine_id`,
        [firstDay],
      );
  return new Map(rows.map((r) => [r.machineId, r.seconds]));
}

/**
 * The 30-day uptime in hundredths of a percent: seconds up over the seconds since
 * `max(createdAt, now - 30 days)`, capped at 100 %, rounded to the nearest hundredth.
 */
export function uptimeCentiPct(secondsUp: number, createdAtMs: number, now: Date): number {
  const windowStart = Math.max(createdAtMs, now.getTime() - UPTIME_WINDOW_MS);
  const windowSeconds = Math.max(1, (now.getTime() - windowStart) / 1000);
  return Math.min(10_000, Math.round((10_000 * secondsUp) / windowSeconds));
}
