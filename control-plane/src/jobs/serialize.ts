import type { Job, JobReceipt } from '@gpufarm/shared';
import type { JobRow } from './store.js';

/** The spec's job object for a stored job. Parts that exist only later (assignment…) are null. */
export function toJob(row: JobRow, publicUrl: string): Job {
  return {
    object: 'job',
    id: row.id,
    status: row.status,
    verificationLevel: null,
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
    assignment: null,
    cost: null,
    result: null,
    receipt: receiptOf(row),
    artifacts: [],
  };
}

/**
 * The escrow's record: from the completion on (`completed`, `disputed`, `released`), or the
 * refund once authorized on chain (`refund_authorized`, `refunded`: the whole deposit); null before.
 */
function receiptOf(row: JobRow): JobReceipt | null {
  const transactions = { fund: row.fund_tx_hash, completion: row.completion_tx_hash, release: row.release_tx_hash, refund: row.refund_tx_hash };
  if (row.settlement_status) {
    return {
      jobKey: row.escrow_job_key,
      status: row.settlement_status,
      amount: row.settlement_amount ?? '0',
      computeSeconds: row.compute_seconds ?? 0,
      resultHash: row.result_hash,
      challengeEndsAt: row.challenge_ends_at?.toISOString() ?? null,
      transactions,
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
    };
  }
  return null;
}
