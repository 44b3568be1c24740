import type { Queryable } from '../db/database.js';
import { AGENT_DISPATCH_CHANNEL, type DispatchNotice } from './notice.js';

/** Raises one `agent_dispatch` notice (delivered when the surrounding transaction commits). */
export async function notifyAgent(db: Queryable, notice: DispatchNotice): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [AGENT_DISPATCH_CHANNEL, JSON.stringify(notice)]);
}
