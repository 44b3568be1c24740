import type { Queryable } from '../db/database.js';

/**
 * One row per (machine, GPU class) of every machine that is online on an active farm, priced
 * or not: the offer index's raw material. `uptimeCentiPct` is the 30-day uptime in hundredths
 * of a percent.
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
  uptimeCentiPct: number;
}

/**
 * The 30-day uptime is the seconds a machine was heard from in the UTC days since
 * `max(created_at, now - 30 days)` over the seconds since then, capped at 100 %. The day rows
 * are grouped per machine first (index `machine_uptime_days_day` bounds the days read); the GPUs
 * per machine and class come from the `machine_gpus` primary key.
 */
const LOAD_FLEET_SQL = `
WITH uptime AS (
  SELECT machine_id, sum(seconds_up)::bigint AS seconds_up
  FROM machine_uptime_days
  WHERE day >= (($1::timestamptz - interval '30 days') AT TIME ZONE 'UTC')::date
  GROUP BY machine_id
), gpus AS (
  SELECT machine_id, class_id, count(*)::int AS gpus, (count(*) FILTER (WHERE busy))::int AS busy
  FROM machine_gpus
  GROUP BY machine_id, class_id
)
SELECT m.id AS "machineId", m.farm_id AS "farmId", f.slug AS "farmSlug", f.name AS "farmName", f.provider,
  m.region_key AS "regionKey", g.class_id AS "classId", g.gpus, g.busy,
  m.price_per_gpu_hour_micro_usd AS "pricePerGpuHourMicroUsd", m.min_billing_seconds AS "minBillingSeconds",
  m.benchmark_tier AS "benchmarkTier", m.cuda_version AS "cudaVersion", m.driver_version AS "driverVersion",
  m.workloads, m.simulated,
  round(least(10000, 10000 * coalesce(u.seconds_up, 0)::numeric
    / greatest(1, extract(epoch FROM $1::timestamptz - greatest(m.created_at, $1::timestamptz - interval '30 days')))))::int AS "uptimeCentiPct"
FROM machines m
JOIN farms f ON f.id = m.farm_id AND f.status = 'active'
JOIN gpus g ON g.machine_id = m.id
LEFT JOIN uptime u ON u.machine_id = m.id
WHERE m.status = 'online'`;

/** Reads the whole offered fleet as of `now`. */
export async function loadFleetRows(db: Queryable, now: Date): Promise<FleetRow[]> {
  return db.query<FleetRow>(LOAD_FLEET_SQL, [now]);
}
