import type { Queryable } from '../db/database.js';

/** The reads of `machineGpuHealth` (the verdicts are written by `machines/gpus-store.ts`). */

export async function loadMachineHealthRow(db: Queryable, machineId: string): Promise<{ status: string; health_reason: string | null; gpu_health: unknown } | null> {
  const [row] = await db.query<{ status: string; health_reason: string | null; gpu_health: unknown }>('SELECT status, health_reason, gpu_health FROM machines WHERE id = $1', [machineId]);
  return row ?? null;
}

export interface GpuHealthRow {
  gpu_index: number;
  uuid: string | null;
  class_id: string;
  busy: boolean;
  health: string;
  health_reasons: unknown;
  health_changed_at: Date | null;
}

export function loadGpuHealthRows(db: Queryable, machineId: string): Promise<GpuHealthRow[]> {
  return db.query<GpuHealthRow>('SELECT gpu_index, uuid, class_id, busy, health, health_reasons, health_changed_at FROM machine_gpus WHERE machine_id = $1 ORDER BY gpu_index', [machineId]);
}
