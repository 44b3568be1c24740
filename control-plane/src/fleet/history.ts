import type { HeartbeatMessage } from '@gpufarm/shared';
import { startPeriodic, type Periodic } from '../background/periodic.js';
import { withAdvisoryLock } from '../db/advisory-lock.js';
import type { Database } from '../db/database.js';
import {
  createHistoryPartition,
  deleteOldFleetSeries,
  dropHistoryPartition,
  lastRolledQuarter,
  listHistoryPartitions,
  mergeMinuteCells,
  rollUpQuarterHours,
  sampleFleetMinute,
  type HistoryTable,
  type SampleCell,
} from './history-store.js';
import type { Logger } from '../logger.js';

/**
 * GPU history at a bounded cost. Heartbeats are summed in the replica per (machine, GPU, minute)
 * and flushed in one multi-row upsert that adds to what other replicas wrote; closed quarter
 * hours are rolled into 15-minute rows; both tables are partitioned by UTC day and dropped a
 * day at a time past their retention (minute rows 48 h, 15-minute rows 30 d).
 */

export const MINUTE_RETENTION_HOURS = 48;
export const QUARTER_RETENTION_DAYS = 30;
const DAY_MS = 86_400_000;
const QUARTER_MS = 900_000;
/** Days ahead whose partitions are kept ready. */
const DAYS_AHEAD = 2;

/** A machine's cells: per minute bucket, the GPUs' cells by GPU index. */
type MachineCells = Map<number, SampleCell[]>;

/** Per-minute sums of the GPU figures heard since the last flush. */
export class GpuSampleAggregator {
  // Keyed by the machine's id, then the bucket and the GPU index: a heartbeat makes no key string.
  private machines = new Map<string, MachineCells>();
  private count = 0;

  /** Adds one heartbeat's GPU figures at `atMs`. Costs a map update per GPU; no I/O. */
  add(machineId: string, gpus: HeartbeatMessage['gpus'], atMs: number): void {
    const bucket = Math.floor(atMs / 60_000) * 60;
    const row = this.cellsOf(machineId, bucket);
    for (const g of gpus) {
      let c = row[g.index];
      if (!c) {
        c = { machineId, gpuIndex: g.index, bucket, samples: 0, utilSum: 0, utilN: 0, tempSum: 0, tempMax: null, tempN: 0, memSum: 0, memMax: null, memN: 0, powerSum: 0, powerMax: null, powerN: 0 };
        row[g.index] = c;
        this.count += 1;
      }
      c.samples += 1;
      if (g.utilizationPercent !== null) { c.utilSum += g.utilizationPercent; c.utilN += 1; }
      if (g.temperatureC !== null) { c.tempSum += g.temperatureC; c.tempN += 1; c.tempMax = Math.max(c.tempMax ?? g.temperatureC, g.temperatureC); }
      if (g.memoryUsedBytes !== null) { c.memSum += g.memoryUsedBytes; c.memN += 1; c.memMax = Math.max(c.memMax ?? g.memoryUsedBytes, g.memoryUsedBytes); }
      if (g.powerDrawWatts !== null) { c.powerSum += g.powerDrawWatts; c.powerN += 1; c.powerMax = Math.max(c.powerMax ?? g.powerDrawWatts, g.powerDrawWatts); }
    }
  }

  get pending(): number {
    return this.count;
  }

  /**
   * Writes what was summed (in batches of `batch` cells) and starts afresh; with `before`
   * (epoch ms), only the minutes that ended by then, so each cell is made and written once.
   * Cells that failed to write are kept for the next flush.
   */
  async flush(db: Database, options: { before?: number; batch?: number } = {}): Promise<number> {
    const batch = options.batch ?? 5_000;
    const cutoff = options.before === undefined ? Number.POSITIVE_INFINITY : Math.floor(options.before / 60_000) * 60;
    const cells: SampleCell[] = [];
    for (const [machineId, buckets] of this.machines) {
      for (const [bucket, row] of buckets) {
        if (bucket >= cutoff) continue;
        for (const c of row) if (c) cells.push(c);
        buckets.delete(bucket);
      }
      if (buckets.size === 0) this.machines.delete(machineId);
    }
    this.count -= cells.length;
    let written = 0;
    try {
      for (let i = 0; i < cells.length; i += batch) {
        await mergeMinuteCells(db, cells.slice(i, i + batch));
        written = i + Math.min(batch, cells.length - i);
      }
    } catch (err) {
      // Sums add, so putting the unwritten ones back loses nothing and doubles nothing.
      for (const c of cells.slice(written)) this.addCell(c);
      throw err;
    }
    return written;
  }

  private cellsOf(machineId: string, bucket: number): SampleCell[] {
    let buckets = this.machines.get(machineId);
    if (!buckets) {
      buckets = new Map();
      this.machines.set(machineId, buckets);
    }
    let row = buckets.get(bucket);
    if (!row) {
      row = [];
      buckets.set(bucket, row);
    }
    return row;
  }

  private addCell(c: SampleCell): void {
    const row = this.cellsOf(c.machineId, c.bucket);
    const had = row[c.gpuIndex];
    if (!had) {
      row[c.gpuIndex] = { ...c };
      this.count += 1;
      return;
    }
    had.samples += c.samples;
    had.utilSum += c.utilSum; had.utilN += c.utilN;
    had.tempSum += c.tempSum; had.tempN += c.tempN; had.tempMax = maxOf(had.tempMax, c.tempMax);
    had.memSum += c.memSum; had.memN += c.memN; had.memMax = maxOf(had.memMax, c.memMax);
    had.powerSum += c.powerSum; had.powerN += c.powerN; had.powerMax = maxOf(had.powerMax, c.powerMax);
  }
}

function maxOf(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.max(a, b);
}

function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export interface HistoryUpkeepPass {
  created: string[];
  dropped: string[];
  rolledQuarters: number;
}

/**
 * One upkeep pass at `nowMs` (one replica at a time; null when another runs one): partitions of
 * today and the next days made, those past retention dropped, closed quarter hours since the
 * last rollup rolled up (at most the minute retention back), and this minute's fleet figures.
 */
export async function maintainHistory(db: Database, nowMs: number): Promise<HistoryUpkeepPass | null> {
  const pass = await withAdvisoryLock(
    db,
    'fleet history',
    async (): Promise<HistoryUpkeepPass> => {
      const result: HistoryUpkeepPass = { created: [], dropped: [], rolledQuarters: 0 };
      const partitions = await listHistoryPartitions(db);
      const existing = new Set(partitions.map((p) => `${p.table}/${p.day}`));
      for (const table of ['gpu_samples_minute', 'gpu_samples_15m'] as const satisfies readonly HistoryTable[]) {
        for (let n = 0; n <= DAYS_AHEAD; n += 1) {
          const day = utcDay(nowMs + n * DAY_MS);
          if (!existing.has(`${table}/${day}`) && (await createHistoryPartition(db, table, day))) result.created.push(`${table}_p${day.replaceAll('-', '')}`);
        }
      }
      const keepMs: Record<HistoryTable, number> = { gpu_samples_minute: MINUTE_RETENTION_HOURS * 3_600_000, gpu_samples_15m: QUARTER_RETENTION_DAYS * DAY_MS };
      for (const p of partitions) {
        // A day partition goes once its whole day is past the retention.
        if (Date.parse(`${p.day}T00:00:00Z`) + DAY_MS > nowMs - keepMs[p.table]) continue;
        await dropHistoryPartition(db, p.name);
        result.dropped.push(p.name);
      }
      const closedUntil = Math.floor(nowMs / QUARTER_MS) * QUARTER_MS;
      const last = await lastRolledQuarter(db);
      const floor = closedUntil - MINUTE_RETENTION_HOURS * 3_600_000;
      let from = Math.max(last ? last.getTime() + QUARTER_MS : floor, floor);
      // The quarter being written is redone each pass until it closes.
      if (last && last.getTime() + QUARTER_MS > closedUntil) from = last.getTime();
      if (from < closedUntil) {
        await rollUpQuarterHours(db, { from: new Date(from), to: new Date(closedUntil) });
        result.rolledQuarters = (closedUntil - from) / QUARTER_MS;
      }
      await sampleFleetMinute(db, new Date(Math.floor(nowMs / 60_000) * 60_000));
      await deleteOldFleetSeries(db, QUARTER_RETENTION_DAYS);
      return result;
    },
    { wait: false },
  );
  return pass.ran ? pass.value : null;
}

/** Flushes the ended minutes of `aggregator` every `flushMs` and runs the upkeep every minute, until closed. */
export function startHistoryLoop(deps: { db: Database; aggregator: GpuSampleAggregator; log: Logger; now?: () => number }, options: { flushMs?: number } = {}): Periodic {
  const now = deps.now ?? Date.now;
  let lastUpkeep = 0;
  return startPeriodic({
    name: 'fleet history',
    intervalMs: options.flushMs ?? 15_000,
    log: deps.log,
    run: async () => {
      // The minute under way stays in memory until it ends: it would be written again each flush.
      await deps.aggregator.flush(deps.db, { before: now() });
      if (now() - lastUpkeep >= 60_000) {
        await maintainHistory(deps.db, now());
        lastUpkeep = now();
      }
    },
  });
}
