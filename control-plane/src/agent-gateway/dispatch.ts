import type { Queryable } from '../db/database.js';

/**
 * Messages for a machine's agent travel through PostgreSQL NOTIFY, so the replica holding the
 * agent's WebSocket sends them whichever replica decided. The
 * payload names the assignment; the gateway reads what to send from the database.
 */
export const AGENT_DISPATCH_CHANNEL = 'agent_dispatch';

export interface DispatchNotice {
  machineId: string;
  assignmentId: string;
  /** `assign`: send the assignment; `cancel`: tell the agent to stop it. */
  kind: 'assign' | 'cancel';
  /** For `cancel`: why (shown in the job's log by the agent). */
  reason?: string;
}

export async function notifyAgent(db: Queryable, notice: DispatchNotice): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [AGENT_DISPATCH_CHANNEL, JSON.stringify(notice)]);
}
