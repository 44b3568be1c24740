import type { JobStatus } from '@gpufarm/shared';
import type { Queryable, Transaction } from '../db/database.js';

export interface JobRow {
  id: string;
  /** Insertion order: lists walk it, since ids are random. */
  seq: number;
  account_id: string;
  status: JobStatus;
  spec: unknown;
  spec_hash: string;
  title: string | null;
  gpu_count: number;
  workload_type: string;
  max_runtime_seconds: number;
  max_price_per_gpu_hour_micro_usd: number;
  min_billing_seconds: number;
  platform_fee_bps: number;
  estimate_low_micro_usd: number;
  estimate_high_micro_usd: number;
  max_cost_micro_usd: number;
  matched_classes: string[];
  payment_kind: 'eth' | 'stable';
  payment_token: string;
  payment_symbol: string;
  payment_decimals: number;
  max_payment: string;
  wei_per_usd: string | null;
  escrow_job_key: string;
  cancel_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, seq, account_id, status, spec, spec_hash, title, gpu_count, workload_type, max_runtime_seconds,
  max_price_per_gpu_hour_micro_usd, min_billing_seconds, platform_fee_bps, estimate_low_micro_usd, estimate_high_micro_usd,
  max_cost_micro_usd, matched_classes, payment_kind, payment_token, payment_symbol, payment_decimals, max_payment::text AS max_payment,
  wei_per_usd::text AS wei_per_usd, escrow_job_key, cancel_reason, created_at, updated_at`;

export type NewJob = Omit<JobRow, 'seq' | 'status' | 'cancel_reason' | 'created_at' | 'updated_at'> & { api_key_id: string };

export async function insertJob(db: Queryable, job: NewJob): Promise<JobRow> {
  // Only what the database decides comes back; the rest is what was sent.
  const [row] = await db.query<Pick<JobRow, 'seq' | 'created_at' | 'updated_at'>>(
    `INSERT INTO jobs (id, account_id, api_key_id, status, spec, spec_hash, title, gpu_count, workload_type, max_runtime_seconds,
       max_price_per_gpu_hour_micro_usd, min_billing_seconds, platform_fee_bps, estimate_low_micro_usd, estimate_high_micro_usd,
       max_cost_micro_usd, matched_classes, payment_kind, payment_token, payment_symbol, payment_decimals, max_payment, wei_per_usd, escrow_job_key)
     VALUES ($1, $2, $3, 'CREATED', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
     RETURNING seq, created_at, updated_at`,
    [
      job.id, job.account_id, job.api_key_id, JSON.stringify(job.spec), job.spec_hash, job.title, job.gpu_count, job.workload_type,
      job.max_runtime_seconds, job.max_price_per_gpu_hour_micro_usd, job.min_billing_seconds, job.platform_fee_bps,
      job.estimate_low_micro_usd, job.estimate_high_micro_usd, job.max_cost_micro_usd, job.matched_classes, job.payment_kind,
      job.payment_token, job.payment_symbol, job.payment_decimals, job.max_payment, job.wei_per_usd, job.escrow_job_key,
    ],
  );
  if (!row) throw new Error('INSERT … RETURNING gave no row');
  const { api_key_id: _apiKeyId, ...stored } = job;
  return { ...stored, ...row, status: 'CREATED', cancel_reason: null };
}

/** The account's job, or null (another account's job is as absent as a missing one). */
export async function findJob(db: Queryable, accountId: string, jobId: string): Promise<JobRow | null> {
  const [row] = await db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE id = $1 AND account_id = $2`, [jobId, accountId]);
  return row ?? null;
}

/** One page of the account's jobs, newest first, below insertion position `beforeSeq`. */
export async function listJobs(
  db: Queryable,
  params: { accountId: string; statuses: readonly JobStatus[] | null; limit: number; beforeSeq: number | null },
): Promise<JobRow[]> {
  return db.query<JobRow>(
    `SELECT ${COLUMNS} FROM jobs
      WHERE account_id = $1 AND ($2::text[] IS NULL OR status = ANY($2::text[])) AND ($3::bigint IS NULL OR seq < $3::bigint)
      ORDER BY seq DESC LIMIT $4`,
    [params.accountId, params.statuses, params.beforeSeq, params.limit],
  );
}

/**
 * Applies one transition as a guarded write: only when the job is still in `from`. Returns the
 * updated row, or null when another writer moved the job first.
 */
export async function applyTransition(
  db: Queryable,
  params: { jobId: string; from: JobStatus; to: JobStatus; cancelReason?: string | null },
): Promise<JobRow | null> {
  const [row] = await db.query<JobRow>(
    `UPDATE jobs SET status = $3, updated_at = now(), cancel_reason = COALESCE($4, cancel_reason)
      WHERE id = $1 AND status = $2 RETURNING ${COLUMNS}`,
    [params.jobId, params.from, params.to, params.cancelReason ?? null],
  );
  return row ?? null;
}

export interface IdempotencyRecord {
  request_hash: string;
  job_id: string;
  /** The first response's JSON text. */
  response: string;
}

/**
 * Claims `key` for this request inside the creating transaction. On PostgreSQL a concurrent
 * claim of the same key waits here until the first commits, then sees its row: so a double
 * submit creates one job. Returns the existing record when the key was used in the last 24
 * hours; an older use is forgotten and the key claimed again.
 */
export async function claimIdempotencyKey(
  tx: Transaction,
  params: { accountId: string; key: string; requestHash: string; jobId: string; response: string },
): Promise<IdempotencyRecord | null> {
  const inserted = await tx.query(
    `INSERT INTO idempotency_keys (account_id, key, request_hash, job_id, response) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (account_id, key) DO UPDATE
       SET request_hash = EXCLUDED.request_hash, job_id = EXCLUDED.job_id, response = EXCLUDED.response, created_at = now()
       WHERE idempotency_keys.created_at <= now() - interval '24 hours'
     RETURNING key`,
    [params.accountId, params.key, params.requestHash, params.jobId, params.response],
  );
  if (inserted.length > 0) return null;
  return findIdempotencyKey(tx, params.accountId, params.key);
}

export async function findIdempotencyKey(db: Queryable, accountId: string, key: string): Promise<IdempotencyRecord | null> {
  const [row] = await db.query<IdempotencyRecord>(
    `SELECT request_hash, job_id, response FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND created_at > now() - interval '24 hours'`,
    [accountId, key],
  );
  return row ?? null;
}
