import type { Queryable } from '../db/database.js';
import type { ExecutionConfig } from '../config.js';

/**
 * Machine liveness (issue 7, Build 2), checked by every replica on a timer; each step is one
 * statement, and the job changes it leads to are the lifecycle's guarded writes, so several
 * replicas sweeping at once change each row once.
 *
 * 1. An enrolled machine (online, unhealthy or draining) not heard from for
 *    `machineOfflineSeconds` goes offline (`offline_since` = now) and offers nothing.
 * 2. Accepted or running assignments of a machine offline for more than
 *    `machineLostGraceSeconds` are lost (the job is requeued or failed). A machine that says
 *    hello before that is online again and its jobs continue.
 * 3. Offered assignments not accepted within `assignTimeoutSeconds` are taken back as
 *    rejected with reason `timeout`.
 */

/**
 * The soonest a machine's accepted and running assignments can be requeued, counted from its
 * last heartbeat: offline after `machineOfflineSeconds`, lost `machineLostGraceSeconds` after
 * that (a later sweep only adds to it). Agents get it in `welcome` (`lostAfterSeconds`) and stop
 * their containers before it while they cannot reach the control plane.
 */
export function lostAfterSeconds(config: Pick<ExecutionConfig, 'machineOfflineSeconds' | 'machineLostGraceSeconds'>): number {
  return config.machineOfflineSeconds + config.machineLostGraceSeconds;
}

/** Marks silent machines offline; returns their ids. Seeded machines (no token) never connect and are left alone. */
export async function markSilentMachinesOffline(db: Queryable, config: Pick<ExecutionConfig, 'machineOfflineSeconds'>): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `UPDATE machines SET status = 'offline', offline_since = now(), updated_at = now()
      WHERE status IN ('online', 'unhealthy', 'draining') AND token_hash IS NOT NULL
        AND (last_heartbeat_at IS NULL OR last_heartbeat_at < now() - make_interval(secs => $1))
      RETURNING id`,
    [config.machineOfflineSeconds],
  );
  return rows.map((r) => r.id);
}

/** Accepted or running assignments whose machine has been offline past the grace period. */
export async function assignmentsPastGrace(db: Queryable, config: Pick<ExecutionConfig, 'machineLostGraceSeconds'>): Promise<Array<{ id: string; machineId: string }>> {
  return db.query<{ id: string; machineId: string }>(
    `SELECT a.id, a.machine_id AS "machineId" FROM assignments a JOIN machines m ON m.id = a.machine_id
      WHERE a.state IN ('accepted', 'running') AND m.status = 'offline'
        AND m.offline_since < now() - make_interval(secs => $1)
      ORDER BY a.offered_at LIMIT 500`,
    [config.machineLostGraceSeconds],
  );
}

/** Offered assignments the agent did not accept in time. */
export async function unansweredOffers(db: Queryable, config: Pick<ExecutionConfig, 'assignTimeoutSeconds'>): Promise<Array<{ id: string; machineId: string }>> {
  return db.query<{ id: string; machineId: string }>(
    `SELECT id, machine_id AS "machineId" FROM assignments
      WHERE state = 'offered' AND offered_at < now() - make_interval(secs => $1)
      ORDER BY offered_at LIMIT 500`,
    [config.assignTimeoutSeconds],
  );
}
