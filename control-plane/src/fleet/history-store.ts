import type { Queryable } from '../db/database.js';

/**
 * GPU history's SQL (migration 017): per-minute and per-15-minute sums in day partitions of
 * `gpu_samples_minute` and `gpu_samples_15m`, and the fleet's per-minute figures.
 */

export type HistoryTable = 'gpu_samples_minute' | 'gpu_samples_15m';

/** One (machine, GPU, bucket) cell: sums, counts and maxima, so cells written apart add up. */
export interface SampleCell {
  machineId: string;
  gpuIndex: number;
  /** Bucket start, epoch seconds. */
  bucket: number;
  samples: number;
  utilSum: number; utilN: number;
  tempSum: number; tempMax: number | null; tempN: number;
  memSum: number; memMax: number | null; memN: number;
  powerSum: number; powerMax: number | null; powerN: number;
}

const MERGE = `ON CONFLICT (machine_id, gpu_index, bucket) DO UPDATE SET
  samples = t.samples + excluded.samples,
  util_sum = t.util_sum + excluded.util_sum, util_n = t.util_n + excluded.util_n,
  temp_sum = t.temp_sum + excluded.temp_sum, temp_n = t.temp_n + excluded.temp_n, temp_max = greatest(t.temp_max, excluded.temp_max),
  mem_sum = t.mem_sum + excluded.mem_sum, mem_n = t.mem_n + excluded.mem_n, mem_max = greatest(t.mem_max, excluded.mem_max),
  power_sum = t.power_sum + excluded.power_sum, power_n = t.power_n + excluded.power_n, power_max = greatest(t.power_max, excluded.power_max)`;

/** Adds cells to the minute table in one statement (several replicas may add to one minute). */
export async function mergeMinuteCells(db: Queryable, cells: readonly SampleCell[]): Promise<void> {
  if (cells.length === 0) return;
  await db.query(
    `INSERT INTO gpu_samples_minute AS t (machine_id, gpu_index, bucket, samples, util_sum, util_n, temp_sum, temp_max, temp_n, mem_sum, mem_max, mem_n, power_sum, power_max, power_n)
     SELECT x.m, x.g, to_timestamp(x.b), x.s, x.us, x.un, x.ts, x.tm, x.tn, x.ms, x.mm, x.mn, x.ps, x.pm, x.pn
       FROM jsonb_to_recordset($1::jsonb) AS x(m text, g int, b float8, s int, us float8, un int, ts float8, tm float8, tn int, ms float8, mm float8, mn int, ps float8, pm float8, pn int)
     ${MERGE}`,
    [
      JSON.stringify(
        cells.map((c) => ({
          m: c.machineId, g: c.gpuIndex, b: c.bucket, s: c.samples, us: c.utilSum, un: c.utilN, ts: c.tempSum, tm: c.tempMax, tn: c.tempN,
          ms: c.memSum, mm: c.memMax, mn: c.memN, ps: c.powerSum, pm: c.powerMax, pn: c.powerN,
        })),
      ),
    ],
  );
}

/**
 * Rolls the minute rows of [from, to) into 15-minute rows, replacing those 15-minute rows (the
 * rollup of a closed quarter hour is recomputed whole, so running it twice changes nothing).
 */
export async function rollUpQuarterHours(db: Queryable, range: { from: Date; to: Date }): Promise<number> {
  await db.query('DELETE FROM gpu_samples_15m WHERE bucket >= $1 AND bucket < $2', [range.from, range.to]);
  const rows = await db.query<{ n: number }>(
    `WITH ins AS (
       INSERT INTO gpu_samples_15m (machine_id, gpu_index, bucket, samples, util_sum, util_n, temp_sum, temp_max, temp_n, mem_sum, mem_max, mem_n, power_sum, power_max, power_n)
       SELECT machine_id, gpu_index, to_timestamp(floor(extract(epoch FROM bucket) / 900) * 900), sum(samples), sum(util_sum), sum(util_n), sum(temp_sum), max(temp_max), sum(temp_n),
              sum(mem_sum), max(mem_max), sum(mem_n), sum(power_sum), max(power_max), sum(power_n)
         FROM gpu_samples_minute WHERE bucket >= $1 AND bucket < $2
        GROUP BY 1, 2, 3
       RETURNING 1)
     SELECT count(*)::int AS n FROM ins`,
    [range.from, range.to],
  );
  return rows[0]?.n ?? 0;
}

/** The latest 15-minute bucket rolled up, or null. */
export async function lastRolledQuarter(db: Queryable): Promise<Date | null> {
  const [row] = await db.query<{ at: Date | null }>('SELECT max(bucket) AS at FROM gpu_samples_15m');
  return row?.at ?? null;
}

export interface HistoryPoint {
  gpu_index: number;
  t: number;
  util: number | null;
  temp: number | null;
  mem: number | null;
  power: number | null;
}

/** A machine's GPU averages per bucket of `table` since `since`, oldest first. */
export function readGpuHistory(db: Queryable, table: HistoryTable, machineId: string, since: Date): Promise<HistoryPoint[]> {
  return db.query<HistoryPoint>(
    `SELECT gpu_index, extract(epoch FROM bucket)::float8 AS t,
            util_sum / nullif(util_n, 0) AS util, temp_sum / nullif(temp_n, 0) AS temp,
            mem_sum / nullif(mem_n, 0) AS mem, power_sum / nullif(power_n, 0) AS power
       FROM ${table === 'gpu_samples_15m' ? 'gpu_samples_15m' : 'gpu_samples_minute'}
      WHERE machine_id = $1 AND bucket >= $2 ORDER BY gpu_index, bucket`,
    [machineId, since],
  );
}

/** Records the fleet's figures for the minute `bucket` unless a replica already did. */
export async function sampleFleetMinute(db: Queryable, bucket: Date): Promise<boolean> {
  const rows = await db.query(
    `INSERT INTO fleet_series_minute (bucket, machines_online, gpus_busy, jobs_queued, jobs_running)
     SELECT $1,
       (SELECT count(*)::int FROM machines WHERE status IN ('online', 'draining', 'unhealthy')),
       (SELECT count(*)::int FROM machine_gpus WHERE busy),
       (SELECT count(*)::int FROM jobs WHERE status IN ('QUEUED', 'MATCHING')),
       (SELECT count(*)::int FROM jobs WHERE status = 'RUNNING')
     ON CONFLICT (bucket) DO NOTHING RETURNING bucket`,
    [bucket],
  );
  return rows.length > 0;
}

export interface FleetSeriesRow {
  t: number;
  machines_online: number;
  gpus_busy: number;
  jobs_queued: number;
  jobs_running: number;
}

/** The fleet's figures since `since`, averaged per `stepSeconds`, oldest first. */
export function readFleetSeries(db: Queryable, since: Date, stepSeconds: number): Promise<FleetSeriesRow[]> {
  return db.query<FleetSeriesRow>(
    `SELECT (floor(extract(epoch FROM bucket) / $2) * $2)::float8 AS t,
            round(avg(machines_online))::int AS machines_online, round(avg(gpus_busy))::int AS gpus_busy,
            round(avg(jobs_queued))::int AS jobs_queued, round(avg(jobs_running))::int AS jobs_running
       FROM fleet_series_minute WHERE bucket >= $1 GROUP BY 1 ORDER BY 1`,
    [since, stepSeconds],
  );
}

/** Deletes fleet figures older than `keepDays` (one row a minute: a plain DELETE stays cheap). */
export async function deleteOldFleetSeries(db: Queryable, keepDays: number): Promise<void> {
  await db.query('DELETE FROM fleet_series_minute WHERE bucket < now() - make_interval(days => $1)', [keepDays]);
}

const PARTITION = /^(gpu_samples_minute|gpu_samples_15m)_p(\d{4})(\d{2})(\d{2})$/;

/** The day partitions of both history tables. */
export async function listHistoryPartitions(db: Queryable): Promise<Array<{ table: HistoryTable; name: string; day: string }>> {
  const rows = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent IN ('gpu_samples_minute'::regclass, 'gpu_samples_15m'::regclass)`,
  );
  return rows.flatMap((r) => {
    const m = PARTITION.exec(r.name);
    return m ? [{ table: m[1] as HistoryTable, name: r.name, day: `${m[2]}-${m[3]}-${m[4]}` }] : [];
  });
}

/** Creates the day partition unless it exists; false when the default partition holds rows of that day. */
export async function createHistoryPartition(db: Queryable, table: HistoryTable, day: string): Promise<boolean> {
  const [row] = await db.query<{ made: boolean }>('SELECT create_history_partition($1, $2::date) AS made', [table, day]);
  return row?.made === true;
}

/** Drops a day partition (named as `listHistoryPartitions` lists them) with its rows. */
export async function dropHistoryPartition(db: Queryable, name: string): Promise<void> {
  if (!PARTITION.test(name)) return;
  // Checked above: the name is letters, digits and underscores.
  await db.query(`DROP TABLE IF EXISTS ${name}`);
}
