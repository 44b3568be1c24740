import type { GpuHealthVerdict } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';

/**
 * The `machine_gpus` table's one writer: the GPUs a machine offers (from its inventory), their
 * health verdicts, and the reservations the control plane makes or frees outside a match (the
 * matcher's own reservation is `reserveMatchedGpus`). A trigger reloads every replica's offer
 * index when a row changes, so each write here touches only what changed.
 */

export interface GpuRow {
  gpu_index: number;
  uuid: string;
  class_id: string;
  vram_bytes: number;
}

/**
 * Makes the machine's `machine_gpus` match `wanted` without touching reservations: changed or
 * new GPUs are upserted (keeping `busy` and `assignment_id`), GPUs no longer listed are removed
 * unless a live assignment holds them or the agent reports them lost (`lostIndexes`: nvidia-smi
 * cannot read them, so the inventory leaves them out, yet they keep their failed verdict for the
 * fleet views until the card is gone). Writes nothing when nothing changed. Returns whether it wrote.
 */
export async function reconcileGpus(db: Queryable, machineId: string, wanted: readonly GpuRow[], lostIndexes: readonly number[] = []): Promise<boolean> {
  const existing = await db.query<GpuRow & { busy: boolean; assignment_id: string | null }>(
    'SELECT gpu_index, uuid, class_id, vram_bytes, busy, assignment_id FROM machine_gpus WHERE machine_id = $1',
    [machineId],
  );
  const byIndex = new Map(existing.map((g) => [g.gpu_index, g]));
  const upserts = wanted.filter((g) => {
    const had = byIndex.get(g.gpu_index);
    return !had || had.uuid !== g.uuid || had.class_id !== g.class_id || Number(had.vram_bytes) !== g.vram_bytes;
  });
  const wantedIndexes = new Set([...wanted.map((g) => g.gpu_index), ...lostIndexes]);
  const removed = existing.filter((g) => !wantedIndexes.has(g.gpu_index) && !g.busy && g.assignment_id === null).map((g) => g.gpu_index);
  if (upserts.length > 0) {
    await db.query(
      `INSERT INTO machine_gpus (machine_id, gpu_index, uuid, class_id, vram_bytes)
       SELECT $1, x.gpu_index, x.uuid, x.class_id, x.vram_bytes
         FROM jsonb_to_recordset($2::jsonb) AS x(gpu_index int, uuid text, class_id text, vram_bytes bigint)
       ON CONFLICT (machine_id, gpu_index) DO UPDATE SET uuid = excluded.uuid, class_id = excluded.class_id, vram_bytes = excluded.vram_bytes,
         -- Another card in the slot does not inherit the old one's verdict; the next heartbeat judges it.
         health = CASE WHEN machine_gpus.uuid IS DISTINCT FROM excluded.uuid THEN 'healthy' ELSE machine_gpus.health END,
         health_reasons = CASE WHEN machine_gpus.uuid IS DISTINCT FROM excluded.uuid THEN '[]'::jsonb ELSE machine_gpus.health_reasons END`,
      [machineId, JSON.stringify(upserts)],
    );
  }
  if (removed.length > 0) {
    await db.query('DELETE FROM machine_gpus WHERE machine_id = $1 AND gpu_index = ANY($2::int[]) AND NOT busy AND assignment_id IS NULL', [machineId, removed]);
  }
  return upserts.length > 0 || removed.length > 0;
}

/**
 * Reserves the GPUs of assignments the agent still holds although the control plane ended them
 * (it requeued them while the machine was cut off), so they are not offered while the old
 * container may still use them; GPUs such a reservation kept from an earlier connection whose
 * assignment the agent no longer holds are freed. Only free GPUs are taken.
 */
export async function holdSupersededGpus(db: Database, machineId: string, assignmentIds: readonly string[]): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(
      `UPDATE machine_gpus g SET busy = false, assignment_id = NULL FROM assignments a
        WHERE g.machine_id = $1 AND a.id = g.assignment_id AND a.state NOT IN ('offered', 'accepted', 'running') AND NOT (a.id = ANY($2::text[]))`,
      [machineId, assignmentIds],
    );
    if (assignmentIds.length === 0) return;
    await tx.query(
      `UPDATE machine_gpus g SET busy = true, assignment_id = a.id FROM assignments a
        WHERE a.id = ANY($2::text[]) AND a.machine_id = $1 AND a.state NOT IN ('offered', 'accepted', 'running')
          AND g.machine_id = $1 AND g.gpu_index = ANY(a.gpu_indices) AND NOT g.busy AND g.assignment_id IS NULL`,
      [machineId, assignmentIds],
    );
  });
}

/** Frees the GPUs `holdSupersededGpus` reserved for these assignments (the agent let go of them). */
export async function releaseSupersededGpus(db: Queryable, machineId: string, assignmentIds: readonly string[]): Promise<void> {
  await db.query(
    `UPDATE machine_gpus g SET busy = false, assignment_id = NULL FROM assignments a
      WHERE g.machine_id = $1 AND g.assignment_id = ANY($2::text[]) AND a.id = g.assignment_id AND a.state NOT IN ('offered', 'accepted', 'running')`,
    [machineId, assignmentIds],
  );
}

/** Frees the GPUs an assignment held (it ended). */
export async function releaseAssignmentGpus(db: Queryable, assignmentId: string): Promise<void> {
  await db.query('UPDATE machine_gpus SET busy = false, assignment_id = NULL WHERE assignment_id = $1', [assignmentId]);
}

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

/**
 * Reserves each `(machine, GPU index)` for its assignment when the GPU is free and not failed;
 * returns how many were reserved (fewer than asked: another matcher won one). For the matcher's
 * batch (`matching/store.ts` `writeMatches` still writes this itself; this is the statement it is to call).
 */
export async function reserveMatchedGpus(tx: Queryable, gpus: { machineIds: readonly string[]; gpuIndexes: readonly number[]; assignmentIds: readonly string[] }): Promise<number> {
  const [row] = await tx.query<{ n: number }>(
    `WITH r AS (
       UPDATE machine_gpus g SET busy = true, assignment_id = w.assignment_id
       FROM unnest($1::text[], $2::int[], $3::text[]) AS w(machine_id, gpu_index, assignment_id)
       WHERE g.machine_id = w.machine_id AND g.gpu_index = w.gpu_index AND NOT g.busy AND g.assignment_id IS NULL AND g.health <> 'failed'
       RETURNING 1
     ) SELECT count(*)::int AS n FROM r`,
    [gpus.machineIds, gpus.gpuIndexes, gpus.assignmentIds],
  );
  return row?.n ?? 0;
}
