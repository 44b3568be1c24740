import type { Queryable } from '../db/database.js';
import type { JobRow } from './store.js';

/** What the timeline reads beside the job's row: each record that made a state, with its time. */
export interface JobTimelineRecords {
  /** When the job last changed status (migration 014). */
  statusChangedAt: Date;
  /** When the funding behind `fund_tx_hash` was credited (a late funding has no `funded` entry). */
  creditedAt: Date | null;
  /** Every run, in order. */
  assignments: Array<{ offered_at: Date; started_at: Date | null }>;
  /** The job's billing entries (`funded`, `charge`, `release`, `refund`), oldest first. */
  billing: Array<{ type: string; tx_hash: string | null; created_at: Date }>;
  /** The operator's escrow transactions for the job (one per action, its latest signing). */
  operatorTransactions: Array<{ action: string; tx_hash: string; state: string; updated_at: Date }>;
}

/** Reads the records of a job's timeline (four statements; operator transactions only once the escrow terms are fixed). */
export async function loadJobTimelineRecords(db: Queryable, job: JobRow, chainId: number): Promise<JobTimelineRecords> {
  const [status, credits, assignments, billing, operatorTransactions] = await Promise.all([
    db.query<{ status_changed_at: Date }>('SELECT status_changed_at FROM jobs WHERE id = $1', [job.id]),
    job.fund_tx_hash
      ? db.query<{ created_at: Date }>('SELECT created_at FROM escrow_credits WHERE job_id = $1 AND tx_hash = $2 ORDER BY created_at LIMIT 1', [job.id, job.fund_tx_hash])
      : Promise.resolve([]),
    db.query<{ offered_at: Date; started_at: Date | null }>('SELECT offered_at, started_at FROM assignments WHERE job_id = $1 ORDER BY attempt, offered_at', [job.id]),
    // By account first: the entries' index is the account's.
    db.query<{ type: string; tx_hash: string | null; created_at: Date }>(
      'SELECT type, tx_hash, created_at FROM billing_entries WHERE account_id = $1 AND job_id = $2 ORDER BY seq',
      [job.account_id, job.id],
    ),
    job.escrow_address
      ? db.query<{ action: string; tx_hash: string; state: string; updated_at: Date }>(
          'SELECT action, tx_hash, state, updated_at FROM operator_transactions WHERE chain_id = $1 AND escrow_address = lower($2) AND job_key = lower($3)',
          [chainId, job.escrow_address, job.escrow_job_key],
        )
      : Promise.resolve([]),
  ]);
  return {
    statusChangedAt: status[0]?.status_changed_at ?? job.updated_at,
    creditedAt: credits[0]?.created_at ?? null,
    assignments,
    billing,
    operatorTransactions,
  };
}
