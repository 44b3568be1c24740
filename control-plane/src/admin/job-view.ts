import { ADMIN_JOB_LOG_LINES, ApiError, type AdminJob } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { loadJobExtras, toJob } from '../jobs/serialize.js';
import { findJobById } from '../jobs/store.js';
import { jobTimeline } from '../jobs/timeline.js';
import { toLogLine } from '../logs/stream.js';
import { listLastLogLines } from '../logs/store.js';
import { findAdminJobPeople } from './store.js';

/**
 * `GET /admin/api/jobs/:id`: any account's job as an admin reads it before deciding a dispute:
 * the job object its customer reads, its timeline, the customer, the machine it ran on, the
 * customer's dispute words and the last lines of its log.
 */
export async function adminJobView(db: Queryable, params: { jobId: string; publicUrl: string; chainId: number }): Promise<AdminJob> {
  const row = await findJobById(db, params.jobId);
  if (!row) throw new ApiError('not_found', `No job ${params.jobId}.`);
  const [extras, timeline, log, people] = await Promise.all([
    loadJobExtras(db, [row], { startup: true }),
    jobTimeline(db, { job: row, chainId: params.chainId }),
    listLastLogLines(db, { jobId: row.id, limit: ADMIN_JOB_LOG_LINES }),
    findAdminJobPeople(db, row.id),
  ]);
  const disputed = row.disputed_at !== null || row.settlement_status === 'disputed' || row.dispute_outcome !== null;
  return {
    job: toJob(row, params.publicUrl, extras.get(row.id)),
    timeline,
    customer: { accountId: row.account_id, wallet: people?.wallet_address ?? '' },
    machineId: people?.machine_id ?? null,
    dispute: disputed
      ? { reason: people?.dispute_reason ?? null, evidence: people?.dispute_evidence ?? null, disputedAt: row.disputed_at?.toISOString() ?? null, disputeEndsAt: row.dispute_ends_at?.toISOString() ?? null }
      : null,
    log: { lines: log.lines.map(toLogLine), total: log.total },
  };
}
