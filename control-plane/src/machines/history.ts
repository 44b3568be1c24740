import type { FleetEventType } from '@gpufarm/shared';
import type { Database } from '../db/database.js';
import { listFleetEvents, type FleetEvent } from '../fleet/events.js';
import { readGpuHistory, type HistoryTable } from '../fleet/history-store.js';
import { machineExists } from './store.js';

/** A machine's GPU history and health events, as the admin and operator machine pages show them. */

export const HISTORY_RANGES = ['1h', '24h', '7d', '30d'] as const;
export type HistoryRange = (typeof HISTORY_RANGES)[number];

const RANGE_SECONDS: Record<HistoryRange, number> = { '1h': 3600, '24h': 86_400, '7d': 7 * 86_400, '30d': 30 * 86_400 };

const HEALTH_EVENT_TYPES = ['machine.unhealthy', 'machine.healthy', 'gpu.failed', 'link.up', 'link.down', 'machine.partitioned', 'machine.drained', 'machine.undrained', 'machine.cordoned', 'machine.uncordoned'] as const satisfies readonly FleetEventType[];

/** A machine's GPU history over `range`: minute rows up to 24 h (kept 48 h), 15-minute rows beyond. Null: no machine. */
export async function machineHistory(db: Database, machineId: string, range: HistoryRange, nowMs = Date.now()) {
  if (!(await machineExists(db, machineId))) return null;
  const table: HistoryTable = RANGE_SECONDS[range] <= 86_400 ? 'gpu_samples_minute' : 'gpu_samples_15m';
  const since = new Date(nowMs - RANGE_SECONDS[range] * 1000);
  const points = await readGpuHistory(db, table, machineId, since);
  const byGpu = new Map<number, { index: number; t: number[]; utilizationPercent: Array<number | null>; temperatureC: Array<number | null>; memoryUsedBytes: Array<number | null>; powerWatts: Array<number | null> }>();
  for (const p of points) {
    let g = byGpu.get(p.gpu_index);
    if (!g) {
      g = { index: p.gpu_index, t: [], utilizationPercent: [], temperatureC: [], memoryUsedBytes: [], powerWatts: [] };
      byGpu.set(p.gpu_index, g);
    }
    g.t.push(Math.round(p.t));
    g.utilizationPercent.push(p.util === null ? null : Math.round(p.util * 10) / 10);
    g.temperatureC.push(p.temp === null ? null : Math.round(p.temp * 10) / 10);
    g.memoryUsedBytes.push(p.mem === null ? null : Math.round(p.mem));
    g.powerWatts.push(p.power === null ? null : Math.round(p.power * 10) / 10);
  }
  const healthEvents: FleetEvent[] = (await listFleetEvents(db, { limit: 500, after: null, machineId, types: HEALTH_EVENT_TYPES, since })).events;
  return { resolutionSeconds: table === 'gpu_samples_minute' ? 60 : 900, gpus: [...byGpu.values()], healthEvents };
}
