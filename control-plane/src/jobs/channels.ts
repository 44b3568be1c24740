import type { Queryable } from '../db/database.js';

/** NOTIFY channel raised when a job enters QUEUED (fund-confirm, a retry): wakes the matchers at once. */
export const JOBS_QUEUED_CHANNEL = 'jobs_queued';

/** Raises `jobs_queued` (delivered when the surrounding transaction commits). */
export async function notifyJobQueued(db: Queryable, jobId: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [JOBS_QUEUED_CHANNEL, jobId]);
}
