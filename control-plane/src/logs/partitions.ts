import { startPeriodic, type Periodic } from '../background/periodic.js';
import { withAdvisoryLock } from '../db/advisory-lock.js';
import type { Database } from '../db/database.js';
import { createDayPartition, dayPartitionName, dropDayPartition, listDayPartitions } from './partition-store.js';
import type { Logger } from '../logger.js';

/**
 * Upkeep of the day partitions of `log_lines` (migration 011): the partitions of today and the
 * next days exist before lines of jobs created then arrive, and partitions whose whole day is
 * older than the retention are dropped (never a DELETE of rows). One replica at a time.
 */

/** Days ahead of today whose partitions are kept ready, so passes missed for days cost nothing. */
export const LOG_PARTITION_DAYS_AHEAD = 7;
/** Between two passes: partitions are a day wide, so an hour keeps each change timely. */
export const LOG_PARTITION_INTERVAL_MS = 3_600_000;

const DAY_MS = 86_400_000;

export interface LogPartitionPass {
  /** Partitions this pass created, by name. */
  created: string[];
  /** Partitions this pass dropped, by name. */
  dropped: string[];
  /** Days (YYYY-MM-DD) left without a partition because the default partition holds their lines. */
  blocked: string[];
}

/** The UTC day of `ms` as YYYY-MM-DD. */
function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/**
 * One pass at `nowMs`: creates the partitions of today and `LOG_PARTITION_DAYS_AHEAD` days after,
 * drops those whose day ended `retentionDays` days or more before `nowMs`. Answers `null` when
 * another replica is running a pass.
 */
export async function maintainLogPartitions(db: Database, params: { nowMs: number; retentionDays: number }): Promise<LogPartitionPass | null> {
  const pass = await withAdvisoryLock(
    db,
    'log partitions',
    async (): Promise<LogPartitionPass> => {
      const result: LogPartitionPass = { created: [], dropped: [], blocked: [] };
      const existing = new Set((await listDayPartitions(db)).map((p) => p.day));
      for (let n = 0; n <= LOG_PARTITION_DAYS_AHEAD; n += 1) {
        const day = utcDay(params.nowMs + n * DAY_MS);
        if (existing.has(day)) continue;
        if (await createDayPartition(db, day)) result.created.push(dayPartitionName(day));
        else result.blocked.push(day);
      }
      const cutoffMs = params.nowMs - params.retentionDays * DAY_MS;
      for (const partition of await listDayPartitions(db)) {
        if (Date.parse(`${partition.day}T00:00:00Z`) + DAY_MS > cutoffMs) continue;
        await dropDayPartition(db, partition.day);
        result.dropped.push(partition.name);
      }
      return result;
    },
    { wait: false },
  );
  return pass.ran ? pass.value : null;
}

/** Runs `maintainLogPartitions` now and then every `intervalMs` until closed. */
export function startLogPartitionLoop(
  deps: { db: Database; log: Logger; now?: () => number },
  options: { retentionDays: number; intervalMs?: number },
): Periodic {
  const now = deps.now ?? Date.now;
  const loop = startPeriodic({
    name: 'log partitions',
    intervalMs: options.intervalMs ?? LOG_PARTITION_INTERVAL_MS,
    log: deps.log,
    run: async () => {
      const pass = await maintainLogPartitions(deps.db, { nowMs: now(), retentionDays: options.retentionDays });
      if (pass && pass.blocked.length > 0) deps.log.warn({ loop: 'log partitions', days: pass.blocked }, `log partitions: the lines of days ${pass.blocked.join(', ')} stay in the default partition`);
    },
  });
  void loop.runOnce();
  return loop;
}
