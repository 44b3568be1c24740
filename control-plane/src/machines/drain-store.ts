import type { Queryable } from '../db/database.js';

/**
 * The drain and cordon columns of `machines` (`fleet/drain.ts` is their interface; a farm's
 * quarantine is `farms/store.ts`'s). The agent's own `draining` report is `store.ts`'s.
 */

/** Who asked for a drain: an admin, or the farm (its operator area or the machine's own `gf-agent drain`). */
export type DrainSetter = 'admin' | 'operator';

export interface DrainRow {
  id: string;
  drain_requested: boolean;
  drain_set_by: DrainSetter | null;
  drain_deadline: Date | null;
  drain_reason: string | null;
  cordoned: boolean;
  cordon_reason: string | null;
}

const DRAIN_COLUMNS = 'id, drain_requested, drain_set_by, drain_deadline, drain_reason, cordoned, cordon_reason';

/** The machine's drain and cordon, locked for update when `lock` (inside a transaction). */
export async function readDrainRow(db: Queryable, machineId: string, options: { lock?: boolean } = {}): Promise<DrainRow | null> {
  const [row] = await db.query<DrainRow>(`SELECT ${DRAIN_COLUMNS} FROM machines WHERE id = $1${options.lock ? ' FOR UPDATE' : ''}`, [machineId]);
  return row ?? null;
}

/** Sets the drain and who asked for it; a repeated drain keeps the time it was first asked. */
export async function writeDrain(db: Queryable, machineId: string, drain: { requested: boolean; setBy: DrainSetter; deadline: Date | null; reason: string | null }): Promise<DrainRow | null> {
  const [row] = await db.query<DrainRow>(
    `UPDATE machines SET drain_requested = $2, drain_set_by = $5, drain_deadline = $3, drain_reason = $4,
       drain_requested_at = CASE WHEN $2 THEN coalesce(CASE WHEN drain_requested THEN drain_requested_at END, now()) END, updated_at = now()
     WHERE id = $1 RETURNING ${DRAIN_COLUMNS}`,
    [machineId, drain.requested, drain.requested ? drain.deadline : null, drain.requested ? drain.reason : null, drain.requested ? drain.setBy : null],
  );
  return row ?? null;
}

export async function writeCordon(db: Queryable, machineId: string, cordon: { cordoned: boolean; reason: string | null }): Promise<DrainRow | null> {
  const [row] = await db.query<DrainRow>(
    `UPDATE machines SET cordoned = $2, cordon_reason = $3, updated_at = now() WHERE id = $1 RETURNING ${DRAIN_COLUMNS}`,
    [machineId, cordon.cordoned, cordon.cordoned ? cordon.reason : null],
  );
  return row ?? null;
}

/** Live assignments of drained machines whose deadline passed, oldest first. */
export function assignmentsPastDrainDeadline(db: Queryable, limit: number): Promise<Array<{ id: string; machineId: string; deadline: Date }>> {
  return db.query<{ id: string; machineId: string; deadline: Date }>(
    `SELECT a.id, a.machine_id AS "machineId", m.drain_deadline AS deadline FROM machines m
       JOIN assignments a ON a.machine_id = m.id AND a.state IN ('offered', 'accepted', 'running')
      WHERE m.drain_requested AND m.drain_deadline IS NOT NULL AND m.drain_deadline <= now()
      ORDER BY a.offered_at LIMIT $1`,
    [limit],
  );
}
