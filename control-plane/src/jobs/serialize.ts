import type { ArtifactSummary, Job, JobAssignment, JobReceipt, JobStartup, JobWithdrawal } from '@gpufarm/shared';
import { listJobsArtifacts } from '../artifacts/store.js';
import type { Queryable } from '../db/database.js';
import { queuedStartup, startupOf } from '../phases/phases.js';
import { loadJobPhases, type JobPhaseSource } from '../phases/store.js';
import { deferredPaymentsOfJobs } from './deferred-payments-store.js';
import { microUsdToTokenUnits } from './settlement.js';
import { listJobAssignments, type JobRow } from './store.js';

/** What a job object shows beyond its own row: where it ran, its stored artifacts, the customer's share the escrow holds, its start phases. */
export interface JobExtras {
  assignment: JobAssignment | null;
  artifacts: ArtifactSummary[];
  withdrawal: JobWithdrawal | null;
  /** Loaded only when asked for (`include=startup`); absent, the job object has no `startup`. */
  startup?: JobStartup | null;
}

const NO_EXTRAS: JobExtras = { assignment: null, artifacts: [], withdrawal: null };

/** The assignment (with farm and coarse region), the output and log artifacts, the deferred payouts and, with `startup`, the start phases of each job, in three or four statements. */
export async function loadJobExtras(db: Queryable, rows: readonly JobRow[], options: { startup?: boolean } = {}): Promise<Map<string, JobExtras>> {
  const out = new Map<string, JobExtras>();
  if (rows.length === 0) return out;
  const assignmentIds = rows.map((r) => r.assignment_id).filter((id): id is string => id !== null);
  const jobIds = rows.map((r) => r.id);
  const [assignments, artifacts, deferred, phases] = await Promise.all([
    listJobAssignments(db, assignmentIds),
    listJobsArtifacts(db, jobIds),
    deferredPaymentsOfJobs(db, jobIds),
    options.startup ? loadJobPhases(db, jobIds) : null,
  ]);
  for (const row of rows) {
    out.set(row.id, { assignment: null, artifacts: artifacts.get(row.id) ?? [], withdrawal: null, ...(phases ? { startup: startupFrom(phases.get(row.id)) } : {}) });
  }
  // A release pays the customer once, so a job has at most one deferral of the customer's share.
  for (const d of deferred) {
    if (d.party !== 'customer') continue;
    out.get(d.jobId)!.withdrawal = {
      status: d.withdrawTxHash ? 'withdrawn' : 'waiting_withdrawal',
      wallet: d.recipient,
      amount: d.amount,
      withdrawTxHash: d.withdrawTxHash,
      withdrawnAt: d.withdrawnAt ? new Date(d.withdrawnAt).toISOString() : null,
    };
  }
  for (const a of assignments) {
    out.get(a.job_id)!.assignment = {
      gpu: { model: a.gpu_model, modelClass: a.class_id, count: a.gpu_count },
      farm: { slug: a.slug, name: a.name },
      region: a.region_key,
      pricePerGpuHourMicroUsd: Number(a.price),
      startedAt: a.started_at?.toISOString() ?? null,
      finishedAt: a.finished_at?.toISOString() ?? null,
      exitCode: a.exit_code,
    };
  }
  return out;
}

/**
 * A job's `startup`: while it waits in QUEUED (first queued, or again after a failed run), the
 * wait since it entered QUEUED; else its latest run's phases; null before it was ever queued, or
 * when its runs predate the phases' records (migration 033).
 */
function startupFrom(source: JobPhaseSource | undefined): JobStartup | null {
  if (!source) return null;
  if (source.status === 'QUEUED') return queuedStartup(source.statusChangedAt);
  return source.run ? startupOf(source.run) : null;
}

/** The spec's job object for a stored job. Parts that exist only later (assignment…) are null. */
export function toJob(row: JobRow, publicUrl: string, extras: JobExtras = NO_EXTRAS): Job {
  const finished = row.total_micro_usd !== null && (row.status === 'COMPLETED' || row.status === 'TIMED_OUT');
  return {
    object: 'job',
    id: row.id,
    status: row.status,
    verificationLevel: row.verification_level,
    pricing: {
      maxPricePerGpuHourMicroUsd: row.max_price_per_gpu_hour_micro_usd,
      minBillingSeconds: row.min_billing_seconds,
      platformFeeBps: row.platform_fee_bps,
      estimateLowMicroUsd: row.estimate_low_micro_usd,
      estimateHighMicroUsd: row.estimate_high_micro_usd,
      maxCostMicroUsd: row.max_cost_micro_usd,
    },
    payment: {
      token: row.payment_token,
      symbol: row.payment_symbol,
      decimals: row.payment_decimals,
      maxPayment: row.max_payment,
      escrowJobKey: row.escrow_job_key,
    },
    links: {
      dashboard: `${publicUrl}/dashboard/jobs/${row.id}`,
      logs: `${publicUrl}/v1/jobs/${row.id}/logs`,
      funding: `${publicUrl}/v1/jobs/${row.id}/funding`,
    },
    assignment: extras.assignment,
    cost: finished
      ? {
          billableGpuSeconds: row.billable_gpu_seconds ?? 0,
          computeMicroUsd: Number(row.compute_micro_usd),
          feeMicroUsd: Number(row.fee_micro_usd),
          totalMicroUsd: Number(row.total_micro_usd),
          finalPayment: row.settlement_amount ?? minPayment(row),
        }
      : null,
    result:
      row.verification_level !== null
        ? { hostHash: row.host_hash, serverHash: row.server_hash, hashesMatch: row.hashes_match ?? false, outputArtifactId: row.output_artifact_id, logArtifactId: row.log_artifact_id }
        : null,
    receipt: receiptOf(row, extras.withdrawal),
    artifacts: extras.artifacts,
    ...(extras.startup === undefined ? {} : { startup: extras.startup }),
  };
}

/** The final payment at the job's terms before the escrow recorded it: the cost in token units, never above maxPayment. */
function minPayment(row: JobRow): string {
  const units = microUsdToTokenUnits(row, Number(row.total_micro_usd));
  const max = BigInt(row.max_payment);
  return (units < max ? units : max).toString();
}

/**
 * The escrow's record: from the completion on (`completed`, `disputed`, `released`), or the
 * refund once authorized on chain (`refund_authorized`, `refunded`: the whole deposit); null before.
 */
function receiptOf(row: JobRow, withdrawal: JobWithdrawal | null): JobReceipt | null {
  const transactions = { fund: row.fund_tx_hash, completion: row.completion_tx_hash, release: row.release_tx_hash, refund: row.refund_tx_hash };
  const later = { disputeEndsAt: row.dispute_ends_at?.toISOString() ?? null, disputeOutcome: row.dispute_outcome, withdrawal };
  if (row.settlement_status) {
    return {
      jobKey: row.escrow_job_key,
      status: row.settlement_status,
      amount: row.settlement_amount ?? '0',
      computeSeconds: row.compute_seconds ?? 0,
      resultHash: row.result_hash,
      challengeEndsAt: row.challenge_ends_at?.toISOString() ?? null,
      transactions,
      ...later,
    };
  }
  if (row.refund_status === 'authorized' || row.refund_status === 'claimed') {
    return {
      jobKey: row.escrow_job_key,
      status: row.refund_status === 'claimed' ? 'refunded' : 'refund_authorized',
      amount: row.max_payment,
      computeSeconds: 0,
      resultHash: null,
      challengeEndsAt: null,
      transactions,
      ...later,
    };
  }
  return null;
}
