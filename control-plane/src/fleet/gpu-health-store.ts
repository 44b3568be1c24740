import type { GpuHealthVerdict } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';

/** The SQL of GPU health: verdicts on `machine_gpus`, and the reads of `machineGpuHealth`. */

/** A verdict to store, keyed by the report's UUID (else its index). */
export interface GpuVerdictWrite {
  report: { index: number; uuid: string | null };
  verdict: GpuHealthVerdict;
  reasons: string[];
}

/** A live assignment on a GPU that was just judged failed. */
export interface FailedGpuAssignment {
  assignmentId: string;
  gpuIndex: number;
  reason: string;
}

/**
 * Writes the verdicts that differ from the stored ones (one UPDATE, none when nothing changed)
 * and returns the live assignments holding a GPU that is failed now. A report names its GPU by
 * UUID, or by index when the agent never read the UUID; a GPU without a report keeps its verdict.
 */
export async function writeGpuVerdicts(db: Database, machineId: string, judged: readonly GpuVerdictWrite[]): Promise<FailedGpuAssignment[]> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ gpu_index: number; uuid: string | null; health: GpuHealthVerdict; health_reasons: string[] }>(
      'SELECT gpu_index, uuid, health, health_reasons FROM machine_gpus WHERE machine_id = $1 FOR UPDATE',
      [machineId],
    );
    const byUuid = new Map(judged.filter((j) => j.report.uuid !== null).map((j) => [j.report.uuid!, j]));
    const byIndex = new Map(judged.filter((j) => j.report.uuid === null).map((j) => [j.report.index, j]));
    const changes: Array<{ gpu_index: number; health: GpuHealthVerdict; reasons: string[] }> = [];
    for (const row of rows) {
      const j = (row.uuid !== null ? byUuid.get(row.uuid) : undefined) ?? byIndex.get(row.gpu_index);
      if (!j) continue;
      if (row.health !== j.verdict || JSON.stringify(row.health_reasons) !== JSON.stringify(j.reasons)) changes.push({ gpu_index: row.gpu_index, health: j.verdict, reasons: j.reasons });
    }
    if (changes.length === 0) return [];
    const updated = await tx.query<{ gpu_index: number; assignment_id: string | null; health: GpuHealthVerdict; health_reasons: string[] }>(
      `UPDATE machine_gpus g SET health = x.health, health_reasons = x.reasons, health_changed_at = now()
         FROM jsonb_to_recordset($2::jsonb) AS x(gpu_index int, health text, reasons jsonb)
        WHERE g.machine_id = $1 AND g.gpu_index = x.gpu_index
        RETURNING g.gpu_index, g.assignment_id, g.health, g.health_reasons`,
      [machineId, JSON.stringify(changes)],
    );
    const held = updated.filter((u) => u.health === 'failed' && u.assignment_id !== null);
    if (held.length === 0) return [];
    const live = new Set(
      (await tx.query<{ id: string }>(`SELECT id FROM assignments WHERE id = ANY($1::text[]) AND state IN ('offered', 'accepted', 'running')`, [held.map((h) => h.assignment_id!)])).map((a) => a.id),
    );
    return held.filter((h) => live.has(h.assignment_id!)).map((h) => ({ assignmentId: h.assignment_id!, gpuIndex: h.gpu_index, reason: `GPU ${h.gpu_index}: ${h.health_reasons.join('; ')}`.slice(0, 1900) }));
  });
}

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
