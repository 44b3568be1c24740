import type { ExecutionConfig } from '../config.js';
import type { Queryable } from '../db/database.js';

/**
 * The gateway's reads for the liveness sweep (`sweeper.ts`) and its link numbering; the machines
 * it marks offline are written by `machines/store.ts`, farms and tokens by `farms/store.ts`.
 */

/** Of these machines, those holding live assignments, with how many. */
export function machinesWithLiveAssignments(db: Queryable, machineIds: readonly string[]): Promise<Array<{ machineId: string; live: number }>> {
  if (machineIds.length === 0) return Promise.resolve([]);
  return db.query<{ machineId: string; live: number }>(
    `SELECT machine_id AS "machineId", count(*)::int AS live FROM assignments
      WHERE machine_id = ANY($1::text[]) AND state IN ('offered', 'accepted', 'running') GROUP BY machine_id`,
    [machineIds],
  );
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

/** Where a replica announces a machine's newest link: `{ machineId, epoch }`. */
export const AGENT_LINKS_CHANNEL = 'agent_links';

/**
 * Numbers a machine's new link (larger than any link before it, on any replica) and announces
 * it on `agent_links`, so a replica holding an older link of the machine closes it.
 */
export async function announceAgentLink(db: Queryable, machineId: string): Promise<number> {
  const [row] = await db.query<{ epoch: number }>(
    `SELECT epoch, pg_notify($1, json_build_object('machineId', $2::text, 'epoch', epoch)::text) IS NULL AS sent
       FROM (SELECT nextval('agent_link_epoch') AS epoch) AS next`,
    [AGENT_LINKS_CHANNEL, machineId],
  );
  return Number(row!.epoch);
}
