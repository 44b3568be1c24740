import type { Job } from '@gpufarm/shared';
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
    receipt: null,
    artifacts: [],
  };
}
