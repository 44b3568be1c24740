import type { JobStatus, VerificationLevel } from '@gpufarm/shared';
import type { Queryable, Transaction } from '../db/database.js';
import { JOBS_QUEUED_CHANNEL } from './channels.js';
import { authorizesRefund } from './transitions.js';

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
  escrow_address: string | null;
  job_hash: string | null;
  cancel_reason: string | null;
  funding_hold: string | null;
  fund_tx_hash: string | null;
  settlement_status: 'completed' | 'disputed' | 'released' | null;
  settlement_amount: string | null;
  compute_seconds: number | null;
  result_hash: string | null;
  challenge_ends_at: Date | null;
  completion_tx_hash: string | null;
  release_tx_hash: string | null;
  refund_status: 'pending' | 'authorized' | 'claimed' | null;
  refund_authorize_tx_hash: string | null;
  refund_tx_hash: string | null;
  /** The customer's `dispute` as the escrow event scan saw it (kept after a resolution). */
  dispute_tx_hash: string | null;
  disputed_at: Date | null;
  /** The escrow's deadline for resolving the dispute (its JobDisputed event); null before one. */
  dispute_ends_at: Date | null;
  /** How a dispute ended: an admin's `resolveDispute`, or the deadline passing (the deposit went back). */
  dispute_outcome: 'resolved' | 'timed_out' | null;
  /** Assignments made so far (the matcher sets it to the attempt number of the one it just made). */
  attempts: number;
  /** The live assignment (MATCHING, RUNNING), or the one that produced the result. */
  assignment_id: string | null;
  verification_level: VerificationLevel | null;
  host_hash: string | null;
  server_hash: string | null;
  hashes_match: boolean | null;
  output_artifact_id: string | null;
  log_artifact_id: string | null;
  billable_gpu_seconds: number | null;
  compute_micro_usd: number | null;
  fee_micro_usd: number | null;
  total_micro_usd: number | null;
  failure_reason: string | null;
  /** The spec's `deterministic` (absent: false), a column the database derives from the spec. */
  deterministic: boolean;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, seq, account_id, status, spec, spec_hash, title, gpu_count, workload_type, max_runtime_seconds,
  max_price_per_gpu_hour_micro_usd, min_billing_seconds, platform_fee_bps, estimate_low_micro_usd, estimate_high_micro_usd,
  max_cost_micro_usd, matched_classes, payment_kind, payment_token, payment_symbol, payment_decimals, max_payment::text AS max_payment,
  wei_per_usd::text AS wei_per_usd, escrow_job_key, escrow_address, job_hash, cancel_reason, funding_hold, fund_tx_hash, settlement_status,
  settlement_amount::text AS settlement_amount, compute_seconds, result_hash, challenge_ends_at, completion_tx_hash, release_tx_hash,
  refund_status, refund_authorize_tx_hash, refund_tx_hash, dispute_tx_hash, disputed_at, dispute_ends_at, dispute_outcome, attempts, assignment_id, verification_level, host_hash, server_hash,
  hashes_match, output_artifact_id, log_artifact_id, billable_gpu_seconds, compute_micro_usd, fee_micro_usd, total_micro_usd,
  failure_reason, deterministic, created_at, updated_at`;

/** Columns a new job starts without (the escrow's later records). */
const ESCROW_DEFAULTS = {
  funding_hold: null,
  fund_tx_hash: null,
  settlement_status: null,
  settlement_amount: null,
  compute_seconds: null,
  result_hash: null,
  challenge_ends_at: null,
  completion_tx_hash: null,
  release_tx_hash: null,
  refund_status: null,
  refund_authorize_tx_hash: null,
  refund_tx_hash: null,
  dispute_tx_hash: null,
  disputed_at: null,
  dispute_ends_at: null,
  dispute_outcome: null,
  attempts: 0,
  assignment_id: null,
  verification_level: null,
  host_hash: null,
  server_hash: null,
  hashes_match: null,
  output_artifact_id: null,
  log_artifact_id: null,
  billable_gpu_seconds: null,
  compute_micro_usd: null,
  fee_micro_usd: null,
  total_micro_usd: null,
  failure_reason: null,
} as const satisfies Partial<JobRow>;

export type NewJob = Omit<JobRow, 'seq' | 'status' | 'cancel_reason' | 'deterministic' | 'created_at' | 'updated_at' | keyof typeof ESCROW_DEFAULTS> & { api_key_id: string | null };

/**
 * Inserts new jobs (status CREATED) in one statement and returns their rows in the order given.
 * One statement for many jobs is the creation path's group commit (see `db/batcher.ts`): the
 * batch travels as one JSON parameter, so the statement text is the same for any batch size.
 */
export async function insertJobs(db: Queryable, jobs: readonly NewJob[]): Promise<JobRow[]> {
  const rows = await db.query<Pick<JobRow, 'id' | 'seq' | 'deterministic' | 'created_at' | 'updated_at'>>(
    `INSERT INTO jobs (id, account_id, api_key_id, status, spec, spec_hash, title, gpu_count, workload_type, max_runtime_seconds,
       max_price_per_gpu_hour_micro_usd, min_billing_seconds, platform_fee_bps, estimate_low_micro_usd, estimate_high_micro_usd,
       max_cost_micro_usd, matched_classes, payment_kind, payment_token, payment_symbol, payment_decimals, max_payment, wei_per_usd, escrow_job_key,
       escrow_address, job_hash)
     SELECT id, account_id, api_key_id, 'CREATED', spec, spec_hash, title, gpu_count, workload_type, max_runtime_seconds,
       max_price_per_gpu_hour_micro_usd, min_billing_seconds, platform_fee_bps, estimate_low_micro_usd, estimate_high_micro_usd,
       max_cost_micro_usd, matched_classes, payment_kind, payment_token, payment_symbol, payment_decimals, max_payment, wei_per_usd, escrow_job_key,
       escrow_address, job_hash
       FROM jsonb_to_recordset($1::jsonb) AS j(id text, account_id text, api_key_id text, spec jsonb, spec_hash text, title text, gpu_count integer,
         workload_type text, max_runtime_seconds integer, max_price_per_gpu_hour_micro_usd bigint, min_billing_seconds integer, platform_fee_bps integer,
         estimate_low_micro_usd bigint, estimate_high_micro_usd bigint, max_cost_micro_usd bigint, matched_classes text[], payment_kind text,
         payment_token text, payment_symbol text, payment_decimals integer, max_payment numeric, wei_per_usd numeric, escrow_job_key text,
         escrow_address text, job_hash text)
     RETURNING id, seq, deterministic, created_at, updated_at`,
    [JSON.stringify(jobs)],
  );
  // Only what the database decides comes back; the rest is what was sent.
  const decided = new Map(rows.map((row) => [row.id, row]));
  return jobs.map((job) => {
    const row = decided.get(job.id);
    if (!row) throw new Error(`INSERT … RETURNING gave no row for ${job.id}`);
    const { api_key_id: _apiKeyId, ...stored } = job;
    return { ...stored, ...ESCROW_DEFAULTS, seq: row.seq, deterministic: row.deterministic, created_at: row.created_at, updated_at: row.updated_at, status: 'CREATED', cancel_reason: null };
  });
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

/** Columns an execution transition sets besides the status (assignment, result, cost). */
export type ExecutionColumns = Partial<
  Pick<
    JobRow,
    | 'assignment_id'
    | 'failure_reason'
    | 'verification_level'
    | 'host_hash'
    | 'server_hash'
    | 'hashes_match'
    | 'output_artifact_id'
    | 'log_artifact_id'
    | 'billable_gpu_seconds'
    | 'compute_micro_usd'
    | 'fee_micro_usd'
    | 'total_micro_usd'
  >
>;

/**
 * Applies one transition as a guarded write: only when the job is still in `from` (and, when
 * `assignmentId` is given, still on that assignment). Returns the updated row, or null when
 * another writer moved the job first.
 */
export async function applyTransition(
  db: Queryable,
  params: {
    jobId: string;
    from: JobStatus;
    to: JobStatus;
    cancelReason?: string | null;
    /** The funding transaction (the `fund` event). */
    fundTxHash?: string | null;
    /** Execution transitions: the job must still be on this assignment. */
    assignmentId?: string;
    set?: ExecutionColumns;
  },
): Promise<JobRow | null> {
  // Column names come from the ExecutionColumns type, never from input.
  const entries = Object.entries(params.set ?? {});
  const sets = entries.map(([column], i) => `, ${column} = $${i + 8}`).join('');
  const [row] = await db.query<JobRow>(
    `UPDATE jobs SET status = $3, updated_at = now(), cancel_reason = COALESCE($4, cancel_reason),
            fund_tx_hash = COALESCE($5, fund_tx_hash),
            refund_status = CASE WHEN $6::boolean AND refund_status IS NULL THEN 'pending' ELSE refund_status END${sets}
      WHERE id = $1 AND status = $2 AND ($7::text IS NULL OR assignment_id = $7) RETURNING ${COLUMNS}`,
    [
      params.jobId,
      params.from,
      params.to,
      params.cancelReason ?? null,
      params.fundTxHash ?? null,
      // A transition with the `authorize_refund` effect makes the refund pending.
      authorizesRefund(params.from, params.to),
      params.assignmentId ?? null,
      ...entries.map(([, value]) => value as string | number | boolean | null),
    ],
  );
  return row ?? null;
}

/**
 * Moves up to `limit` jobs that are still `from` (CREATED) `ageSeconds` after their creation to
 * `to` (EXPIRED), oldest first, in one guarded write: a job funded or canceled meanwhile is left
 * alone, and rows another replica is expiring are skipped. Returns the ids moved.
 */
export async function expireUnfundedJobs(
  db: Queryable,
  params: { from: JobStatus; to: JobStatus; ageSeconds: number; limit: number },
): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `UPDATE jobs SET status = $2, updated_at = now()
      WHERE id IN (SELECT id FROM jobs WHERE status = $1 AND created_at <= now() - make_interval(secs => $3)
                    ORDER BY created_at LIMIT $4 FOR UPDATE SKIP LOCKED)
        AND status = $1
      RETURNING id`,
    [params.from, params.to, params.ageSeconds, params.limit],
  );
  return rows.map((row) => row.id);
}

/** A job by id whatever its account (background work: escrow events, refunds). */
export async function findJobById(db: Queryable, jobId: string): Promise<JobRow | null> {
  const [row] = await db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE id = $1`, [jobId]);
  return row ?? null;
}

/** The job funded under `escrowJobKey`, or null. */
export async function findJobByEscrowKey(db: Queryable, escrowJobKey: string): Promise<JobRow | null> {
  const [row] = await db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE escrow_job_key = $1`, [escrowJobKey.toLowerCase()]);
  return row ?? null;
}

/** Fixes the escrow terms of a job created before funding opened (only once). */
export async function setEscrowTerms(db: Queryable, params: { jobId: string; escrowAddress: string; jobHash: string }): Promise<JobRow | null> {
  const [row] = await db.query<JobRow>(
    `UPDATE jobs SET escrow_address = $2, job_hash = $3, updated_at = now() WHERE id = $1 AND job_hash IS NULL RETURNING ${COLUMNS}`,
    [params.jobId, params.escrowAddress, params.jobHash],
  );
  return row ?? null;
}

/** A funding event that reached a job when it could no longer run (canceled or expired): its deposit goes back. */
export async function recordLateFunding(db: Queryable, params: { jobId: string; fundTxHash: string }): Promise<JobRow | null> {
  const [row] = await db.query<JobRow>(
    `UPDATE jobs SET fund_tx_hash = $2, refund_status = COALESCE(refund_status, 'pending'), updated_at = now()
      WHERE id = $1 AND fund_tx_hash IS NULL AND status IN ('CANCELED', 'EXPIRED') RETURNING ${COLUMNS}`,
    [params.jobId, params.fundTxHash],
  );
  return row ?? null;
}

/** Records changes the escrow made (refund authorized or claimed, completion, release); returns the row. */
export async function updateEscrowRecord(
  db: Queryable,
  jobId: string,
  fields: Partial<Pick<JobRow, 'refund_status' | 'refund_authorize_tx_hash' | 'refund_tx_hash' | 'settlement_status' | 'settlement_amount' | 'compute_seconds' | 'result_hash' | 'challenge_ends_at' | 'completion_tx_hash' | 'release_tx_hash' | 'dispute_tx_hash' | 'disputed_at' | 'dispute_ends_at' | 'dispute_outcome' | 'funding_hold'>> & { settlement_fee?: string },
  guard: { refundStatus?: JobRow['refund_status']; settlementStatus?: JobRow['settlement_status'] } = {},
): Promise<JobRow | null> {
  const entries = Object.entries(fields);
  const sets = entries.map(([column], i) => `${column} = $${i + 2}`);
  const values = entries.map(([, value]) => value);
  const where = ['id = $1'];
  if (guard.refundStatus !== undefined) where.push(guard.refundStatus === null ? 'refund_status IS NULL' : `refund_status = '${guard.refundStatus}'`);
  if (guard.settlementStatus !== undefined) where.push(guard.settlementStatus === null ? 'settlement_status IS NULL' : `settlement_status = '${guard.settlementStatus}'`);
  const [row] = await db.query<JobRow>(
    `UPDATE jobs SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE ${where.join(' AND ')} RETURNING ${COLUMNS}`,
    [jobId, ...values],
  );
  return row ?? null;
}

export interface CreditRow {
  chain_id: number;
  tx_hash: string;
  log_index: number;
  job_id: string;
  block_number: number;
  block_hash: string;
  status: 'credited' | 'reorged';
}

/**
 * Credits one JobFunded log to a job. Returns null when the log was credited already (to this or
 * another job): credits are unique on (chain id, tx hash, log index), so a log funds once, ever.
 */
export async function insertCredit(
  db: Queryable,
  credit: { chainId: number; txHash: string; logIndex: number; jobId: string; jobKey: string; customer: string; token: string; amount: string; blockNumber: bigint; blockHash: string },
): Promise<CreditRow | null> {
  const [row] = await db.query<CreditRow>(
    `INSERT INTO escrow_credits (chain_id, tx_hash, log_index, job_id, job_key, customer, token, amount, block_number, block_hash)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING
     RETURNING chain_id, tx_hash, log_index, job_id, block_number, block_hash, status`,
    [credit.chainId, credit.txHash.toLowerCase(), credit.logIndex, credit.jobId, credit.jobKey.toLowerCase(), credit.customer.toLowerCase(), credit.token.toLowerCase(), credit.amount, credit.blockNumber.toString(), credit.blockHash.toLowerCase()],
  );
  return row ?? null;
}

export async function findCredit(db: Queryable, params: { chainId: number; txHash: string; logIndex: number }): Promise<CreditRow | null> {
  const [row] = await db.query<CreditRow>(
    'SELECT chain_id, tx_hash, log_index, job_id, block_number, block_hash, status FROM escrow_credits WHERE chain_id = $1 AND tx_hash = $2 AND log_index = $3',
    [params.chainId, params.txHash.toLowerCase(), params.logIndex],
  );
  return row ?? null;
}

/** Credits whose jobs have not run yet: the ones a reorg could still take away. */
export async function listCreditsToRecheck(db: Queryable, chainId: number): Promise<(CreditRow & { job_status: JobStatus })[]> {
  return db.query(
    `SELECT c.chain_id, c.tx_hash, c.log_index, c.job_id, c.block_number::int AS block_number, c.block_hash, c.status, j.status AS job_status
       FROM escrow_credits c JOIN jobs j ON j.id = c.job_id
      WHERE c.chain_id = $1 AND c.status = 'credited' AND j.funding_hold IS NULL AND j.status IN ('FUNDED', 'QUEUED', 'MATCHING')`,
    [chainId],
  );
}

export async function markCreditReorged(db: Queryable, params: { chainId: number; txHash: string; logIndex: number }): Promise<void> {
  await db.query(`UPDATE escrow_credits SET status = 'reorged' WHERE chain_id = $1 AND tx_hash = $2 AND log_index = $3`, [params.chainId, params.txHash, params.logIndex]);
}

/** Jobs whose refund still has to be authorized on the escrow. */
export async function listPendingRefunds(db: Queryable, params: { limit: number; untouchedForMs: number }): Promise<JobRow[]> {
  return db.query<JobRow>(
    `SELECT ${COLUMNS} FROM jobs WHERE refund_status = 'pending' AND fund_tx_hash IS NOT NULL AND updated_at <= now() - $2 * interval '1 millisecond'
      ORDER BY updated_at LIMIT $1`,
    [params.limit, params.untouchedForMs],
  );
}

/** Completed jobs whose challenge window ended without a release. */
export async function listReleasesDue(db: Queryable, now: Date, limit: number): Promise<JobRow[]> {
  return db.query<JobRow>(
    `SELECT ${COLUMNS} FROM jobs WHERE settlement_status = 'completed' AND release_tx_hash IS NULL AND challenge_ends_at <= $1 ORDER BY challenge_ends_at LIMIT $2`,
    [now, limit],
  );
}

/** Disputed jobs whose deadline passed without a resolution: the escrow now only returns the deposit. */
export async function listDisputeTimeoutsDue(db: Queryable, now: Date, limit: number): Promise<JobRow[]> {
  return db.query<JobRow>(
    `SELECT ${COLUMNS} FROM jobs WHERE settlement_status = 'disputed' AND dispute_ends_at <= $1 ORDER BY dispute_ends_at LIMIT $2`,
    [now, limit],
  );
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

/** Raises `jobs_queued` (delivered when the surrounding transaction commits). */
export async function notifyJobQueued(db: Queryable, jobId: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [JOBS_QUEUED_CHANNEL, jobId]);
}

/** The kind of a job (`customer` or `verification`), or null when there is no such job. */
export async function findJobKind(db: Queryable, jobId: string): Promise<'customer' | 'verification' | null> {
  const [row] = await db.query<{ kind: 'customer' | 'verification' }>('SELECT kind FROM jobs WHERE id = $1', [jobId]);
  return row?.kind ?? null;
}

/** Locks the job while `assignmentId` is its live (MATCHING or RUNNING) assignment; null otherwise. */
export async function lockJobOfAssignment(tx: Queryable, jobId: string, assignmentId: string): Promise<{ status: 'MATCHING' | 'RUNNING'; kind: string } | null> {
  const [job] = await tx.query<{ status: 'MATCHING' | 'RUNNING'; kind: string }>(
    `SELECT status, kind FROM jobs WHERE id = $1 AND assignment_id = $2 AND status IN ('MATCHING', 'RUNNING') FOR UPDATE`,
    [jobId, assignmentId],
  );
  return job ?? null;
}

/** The assignment of each job as a job object shows it: GPUs, farm, region, price and run times. */
export interface JobAssignmentRow {
  job_id: string;
  gpu_model: string;
  class_id: string;
  gpu_count: number;
  slug: string;
  name: string;
  region_key: string;
  price: number;
  started_at: Date | null;
  finished_at: Date | null;
  exit_code: number | null;
}

export async function listJobAssignments(db: Queryable, assignmentIds: readonly string[]): Promise<JobAssignmentRow[]> {
  if (assignmentIds.length === 0) return [];
  return db.query<JobAssignmentRow>(
    `SELECT a.job_id, a.gpu_model, a.class_id, cardinality(a.gpu_indices) AS gpu_count, f.slug, f.name, m.region_key,
            a.price_per_gpu_hour_micro_usd AS price, a.started_at, a.finished_at, a.exit_code
       FROM assignments a JOIN machines m ON m.id = a.machine_id JOIN farms f ON f.id = m.farm_id
      WHERE a.id = ANY($1)`,
    [assignmentIds],
  );
}

/** How much of its log cap a job used, and whether it reached it; null when there is no such job. */
export async function findJobLogUsage(db: Queryable, jobId: string): Promise<{ log_bytes: number; log_capped: boolean } | null> {
  const [job] = await db.query<{ log_bytes: number; log_capped: boolean }>('SELECT log_bytes, log_capped FROM jobs WHERE id = $1', [jobId]);
  return job ?? null;
}

export async function addJobLogBytes(db: Queryable, jobId: string, bytes: number): Promise<void> {
  await db.query('UPDATE jobs SET log_bytes = log_bytes + $2 WHERE id = $1', [jobId, bytes]);
}

/** Marks the job's log capped; true only for the call that capped it. */
export async function capJobLog(db: Queryable, jobId: string): Promise<boolean> {
  const [first] = await db.query<{ id: string }>('UPDATE jobs SET log_capped = true WHERE id = $1 AND NOT log_capped RETURNING id', [jobId]);
  return first !== undefined;
}

/** Takes the job's next service-line seq; null once its log is capped (unless `force`) or when there is no such job. */
export async function takeServiceLogSeq(db: Queryable, jobId: string, force: boolean): Promise<number | null> {
  const [row] = await db.query<{ seq: number }>(
    'UPDATE jobs SET service_log_seq = service_log_seq + 1 WHERE id = $1 AND ($2::boolean OR NOT log_capped) RETURNING service_log_seq - 1 AS seq',
    [jobId, force],
  );
  return row ? Number(row.seq) : null;
}

/** A matched job: the assignment it moves with and its attempt number. */
export interface MatchedJobMove {
  jobId: string;
  assignmentId: string;
  attempt: number;
}

/**
 * Moves a batch of matched jobs `from` → `to` (guarded by `from` and no funding hold) with
 * their assignment and attempts, taking each one's service-line seq unless its log is capped,
 * in one statement. Returns the jobs that moved, with the seq for their line (null: capped).
 */
export async function moveMatchedJobs(tx: Queryable, moves: readonly MatchedJobMove[], transition: { from: string; to: string }): Promise<Array<{ jobId: string; seq: number | null }>> {
  const rows = await tx.query<{ id: string; seq: number; log_capped: boolean }>(
    `UPDATE jobs j SET status = $3, assignment_id = x.assignment_id, attempts = x.attempt, updated_at = now(),
            service_log_seq = j.service_log_seq + CASE WHEN j.log_capped THEN 0 ELSE 1 END
       FROM jsonb_to_recordset($1::jsonb) AS x(id text, assignment_id text, attempt int)
      WHERE j.id = x.id AND j.status = $2 AND j.funding_hold IS NULL
      RETURNING j.id, j.service_log_seq - 1 AS seq, j.log_capped`,
    [JSON.stringify(moves.map((m) => ({ id: m.jobId, assignment_id: m.assignmentId, attempt: m.attempt }))), transition.from, transition.to],
  );
  return rows.map((r) => ({ jobId: r.id, seq: r.log_capped ? null : Number(r.seq) }));
}


/**
 * Stores the customer's dispute words on their job while it can be or is disputed (its result on
 * the escrow inside the challenge window, or a dispute undecided). When they were stored; null
 * when the job is not in such a state (or not the account's).
 */
export async function setDisputeReason(db: Queryable, params: { accountId: string; jobId: string; reason: string; evidence: string | null }): Promise<Date | null> {
  const [row] = await db.query<{ dispute_reason_at: Date }>(
    `UPDATE jobs SET dispute_reason = $3, dispute_evidence = $4, dispute_reason_at = now()
      WHERE id = $2 AND account_id = $1
        AND (settlement_status = 'disputed' OR (settlement_status = 'completed' AND challenge_ends_at > now()))
      RETURNING dispute_reason_at`,
    [params.accountId, params.jobId, params.reason, params.evidence],
  );
  return row ? new Date(row.dispute_reason_at) : null;
}

/** Title, image and creation time of the account's jobs among `ids` (the dashboard's Jobs list). */
export async function listJobSummaries(db: Queryable, accountId: string, ids: readonly string[]): Promise<Array<{ id: string; title: string | null; image: string | null; created_at: Date }>> {
  return db.query(`SELECT id, title, spec->>'image' AS image, created_at FROM jobs WHERE account_id = $1 AND id = ANY($2::text[])`, [accountId, ids]);
}
