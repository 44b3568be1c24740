import { JOB_STATUSES } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';

/** Every state gets a `gf_jobs` series, 0 when no job is in it. */
export const JOB_STATES_COUNTED = JOB_STATUSES;

/**
 * Jobs per state, one grouped statement (read per scrape). It reads the `status` of every job: a
 * deployment with millions of finished jobs pays a scan per scrape, which at a 15 s interval stays
 * far below the API's own load (`npm run bench -- --only metrics`).
 */
export async function countJobsByState(db: Queryable): Promise<Map<string, number>> {
  const rows = await db.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM jobs GROUP BY status');
  return new Map(rows.map((r) => [r.status, Number(r.n)]));
}

/** Machines per status (`online`, `offline`, `unhealthy`, `draining`, `disabled`). */
export async function countMachinesByStatus(db: Queryable): Promise<Map<string, number>> {
  const rows = await db.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM machines GROUP BY status');
  return new Map(rows.map((r) => [r.status, Number(r.n)]));
}

/**
 * GPUs per catalog class and state: `busy` (reserved by an assignment), `draining`, `idle`
 * (free on an online machine), else the machine's status (`offline`, `unhealthy`, `disabled`).
 */
export async function countFleetGpus(db: Queryable): Promise<Array<{ classId: string; state: string; gpus: number }>> {
  const rows = await db.query<{ class_id: string; state: string; n: number }>(
    `SELECT g.class_id,
            CASE WHEN g.busy THEN 'busy'
                 WHEN m.draining OR m.status = 'draining' THEN 'draining'
                 WHEN m.status = 'online' THEN 'idle'
                 ELSE m.status END AS state,
            count(*)::int AS n
       FROM machine_gpus g JOIN machines m ON m.id = g.machine_id
      GROUP BY 1, 2`,
  );
  return rows.map((r) => ({ classId: r.class_id, state: r.state, gpus: Number(r.n) }));
}
