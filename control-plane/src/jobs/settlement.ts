import { finalCost, type FinalCost } from '@gpufarm/shared';
import type { Address, Hex } from 'viem';
import { findJobCharge, insertBillingEntry } from '../billing/store.js';
import { authorizeRefund, ChainError, claimDisputeTimeout, completeJob, readEscrowJob, releaseJob, type Payout } from '../chain/escrow.js';
import type { Database, Queryable } from '../db/database.js';
import { withParties } from './deferred-payments.js';
import { insertDeferredPayments } from './deferred-payments-store.js';
import type { EscrowDeps } from './funding.js';
import { findJobById, updateEscrowRecord, type JobRow } from './store.js';

/**
 * The escrow effects of the transition table, each an operator transaction followed by a
 * guarded write of what the chain now says. The chain call happens outside any database
 * transaction; a failure leaves the job's record unchanged so the escrow worker retries it.
 * Each call is sent once per job action whichever replica makes it, and however often
 * (`chain/operator-sender.ts`): a repeat gets the receipt of the first.
 */

/** Token base units for micro-USD at the job's terms: stablecoin units scale by decimals, ETH uses the frozen rate (rounded up). */
export function microUsdToTokenUnits(job: Pick<JobRow, 'payment_kind' | 'payment_decimals' | 'wei_per_usd'>, microUsd: number): bigint {
  if (job.payment_kind === 'stable') return BigInt(microUsd) * 10n ** BigInt(job.payment_decimals - 6);
  const rate = BigInt(job.wei_per_usd ?? '0');
  const numerator = BigInt(microUsd) * rate;
  return (numerator + 999_999n) / 1_000_000n;
}

/**
 * The `authorize_refund` effect: asks the escrow to let the customer take the deposit back.
 * Reconciles with the escrow when it refuses (already authorized or claimed). Returns the row.
 */
export async function authorizePendingRefund(deps: { db: Database; escrow: EscrowDeps }, job: JobRow): Promise<JobRow> {
  if (job.refund_status !== 'pending') return job;
  const key = job.escrow_job_key as Hex;
  try {
    const { txHash } = await authorizeRefund(deps.escrow.chain, key, deps.db);
    return (await updateEscrowRecord(deps.db, job.id, { refund_status: 'authorized', refund_authorize_tx_hash: txHash }, { refundStatus: 'pending' })) ?? job;
  } catch (err) {
    if (!(err instanceof ChainError) || err.retryable) throw err;
    const onChain = await readEscrowJob(deps.escrow.chain, key);
    if (onChain.status === 'refund_authorized') return (await updateEscrowRecord(deps.db, job.id, { refund_status: 'authorized' }, { refundStatus: 'pending' })) ?? job;
    if (onChain.status === 'refunded') return (await updateEscrowRecord(deps.db, job.id, { refund_status: 'claimed' }, { refundStatus: 'pending' })) ?? job;
    throw err;
  }
}

export interface CompletionInput {
  jobId: string;
  /** Whole seconds the container ran (rounded up by the caller). */
  runtimeSeconds: number;
  /** The matched machine's price. */
  pricePerGpuHourMicroUsd: number;
  /** bytes32: `0x` + the output's sha256. */
  resultHash: Hex;
  /** The farm's payout address. */
  provider: Address;
}

/**
 * The `settle` effect for the Execution work: computes the final cost (`finalCost`),
 * converts it to token units at the job's terms, caps it at `maxPayment`, sends `completeJob`
 * (payout with the fee inside it) and records the receipt (`completed`, amount, compute
 * seconds, result hash, challenge end, completion transaction) and a `charge` billing entry.
 * The job must be funded and not completed yet; throws a ChainError when the chain refuses.
 */
export async function recordCompletion(deps: { db: Database; escrow: EscrowDeps }, input: CompletionInput): Promise<{ job: JobRow; cost: FinalCost; payout: bigint; fee: bigint }> {
  const job = await findJobById(deps.db, input.jobId);
  if (!job) throw new Error(`no job ${input.jobId}`);
  if (!job.fund_tx_hash) throw new Error(`job ${job.id} is not funded`);
  const cost = finalCost({
    runtimeSeconds: input.runtimeSeconds,
    minBillingSeconds: job.min_billing_seconds,
    gpuCount: job.gpu_count,
    pricePerGpuHourMicroUsd: input.pricePerGpuHourMicroUsd,
    platformFeeBps: job.platform_fee_bps,
  });
  const maxPayment = BigInt(job.max_payment);
  const total = microUsdToTokenUnits(job, cost.totalMicroUsd);
  const payout = total < maxPayment ? total : maxPayment;
  const feeUnits = microUsdToTokenUnits(job, cost.feeMicroUsd);
  const fee = feeUnits < payout ? feeUnits : payout;
  const recorded = await completeJob(deps.escrow.chain, {
    jobKey: job.escrow_job_key as Hex,
    payout,
    fee,
    computeSeconds: cost.billableGpuSeconds,
    resultHash: input.resultHash,
    provider: input.provider,
  }, deps.db);
  // The record is the escrow's: the first completion sent for the job, whichever call sent it.
  const { txHash } = recorded;
  const updated = await deps.db.transaction(async (tx) => {
    const row = await updateEscrowRecord(
      tx,
      job.id,
      {
        settlement_status: 'completed',
        settlement_amount: recorded.payout.toString(),
        settlement_fee: recorded.fee.toString(),
        compute_seconds: recorded.computeSeconds,
        result_hash: recorded.resultHash.toLowerCase(),
        challenge_ends_at: recorded.challengeEndsAt,
        completion_tx_hash: txHash,
      },
      { settlementStatus: null },
    );
    // A completion another replica recorded first has its charge already.
    if (row) await insertBillingEntry(tx, { accountId: job.account_id, type: 'charge', jobId: job.id, amountMicroUsd: cost.totalMicroUsd, token: job.payment_token, amount: recorded.payout.toString(), txHash });
    return row;
  });
  return { job: updated ?? job, cost, payout: recorded.payout, fee: recorded.fee };
}

/**
 * Sends `release` for a completed job whose challenge window ended, and records it. A job someone
 * else paid out meanwhile (the customer's approve) is left to the event scan, which records that
 * release with the payouts the escrow deferred in it.
 */
export async function releaseCompleted(deps: { db: Database; escrow: EscrowDeps }, job: JobRow): Promise<JobRow> {
  const payout = await payOutUnlessPaid(deps, job, () => releaseJob(deps.escrow.chain, job.escrow_job_key as Hex, deps.db));
  return payout ? recordPayout(deps, job, payout) : job;
}

/**
 * Sends a payout transaction of ours; null when the escrow refused it because the job was paid
 * out already by someone else (the customer's approve or claim, anyone's release): the event
 * scan records that transaction. Any other refusal throws.
 */
async function payOutUnlessPaid(deps: { escrow: EscrowDeps }, job: JobRow, send: () => Promise<Payout>): Promise<Payout | null> {
  try {
    return await send();
  } catch (err) {
    if (!(err instanceof ChainError) || err.retryable) throw err;
    const onChain = await readEscrowJob(deps.escrow.chain, job.escrow_job_key as Hex);
    if (onChain.status !== 'released') throw err;
    return null;
  }
}

/** The settlement of a dispute that ended at its deadline: nothing paid out, the whole deposit back to the customer. */
export const DISPUTE_TIMED_OUT = { settlement_amount: '0', settlement_fee: '0', dispute_outcome: 'timed_out' } as const;

/**
 * Sends `claimDisputeTimeout` for a disputed job whose deadline passed without a resolution, and
 * records the outcome (`DISPUTE_TIMED_OUT`, released with its transaction). A dispute that
 * someone else ended (the customer's own claim) is left to the event scan.
 */
export async function endExpiredDispute(deps: { db: Database; escrow: EscrowDeps }, job: JobRow): Promise<JobRow> {
  const payout = await payOutUnlessPaid(deps, job, () => claimDisputeTimeout(deps.escrow.chain, job.escrow_job_key as Hex, deps.db));
  return payout ? recordPayout(deps, job, payout, (tx) => updateEscrowRecord(tx, job.id, DISPUTE_TIMED_OUT, { settlementStatus: 'disputed' })) : job;
}

/**
 * Records a payout transaction of ours in one database transaction: `settle` (the settlement's
 * own fields; the row it answers is released, null: another writer recorded it), the release
 * with its billing entry, and the payouts the escrow deferred in it.
 */
export async function recordPayout(
  deps: { db: Database; escrow: EscrowDeps },
  job: JobRow,
  payout: Payout,
  settle: (tx: Queryable) => Promise<JobRow | null> = async () => job,
): Promise<JobRow> {
  // Whose share each deferral was is the escrow's record of the job: read before the transaction.
  const escrowJob = payout.deferred.length > 0 ? await readEscrowJob(deps.escrow.chain, job.escrow_job_key as Hex) : null;
  return deps.db.transaction(async (tx) => {
    const settled = await settle(tx);
    const row = settled ? await recordRelease(tx, settled, payout.txHash) : job;
    if (escrowJob) {
      await insertDeferredPayments(tx, { chainId: deps.escrow.chain.chainId, escrowAddress: deps.escrow.chain.escrowAddress, jobId: job.id, payments: withParties(escrowJob, payout.deferred) });
    }
    return row;
  });
}

/**
 * Records a release (ours or seen on chain) once, with its billing entries: a `credit` when the
 * final payout (a dispute's outcome) is below the one charged at completion, and the `release`
 * with what went back to the customer's wallet, the deposit less the final payout.
 */
export async function recordRelease(db: Queryable, job: JobRow, txHash: Hex | null): Promise<JobRow> {
  const row = await updateEscrowRecord(db, job.id, { settlement_status: 'released', ...(txHash ? { release_tx_hash: txHash } : {}) }, { settlementStatus: job.settlement_status === 'disputed' ? 'disputed' : 'completed' });
  if (!row) return job;
  if (!txHash) return row;
  const charge = await findJobCharge(db, job.id);
  const money = releaseMoney(row, charge ? { microUsd: charge.microUsd, units: BigInt(charge.units ?? row.settlement_amount ?? '0') } : null);
  const entry = { accountId: job.account_id, jobId: job.id, token: job.payment_token, txHash };
  if (money.credit.microUsd > 0 || money.credit.units > 0n) {
    await insertBillingEntry(db, { ...entry, type: 'credit', amountMicroUsd: money.credit.microUsd, amount: money.credit.units.toString() });
  }
  await insertBillingEntry(db, { ...entry, type: 'release', amountMicroUsd: money.returned.microUsd, amount: money.returned.units.toString() });
  return row;
}

interface Money {
  microUsd: number;
  units: bigint;
}

/**
 * What a release moves for the customer, from the deposit, the charge recorded at completion and
 * the final payout: `credit`, the part of the charge the payout no longer covers (micro-USD in
 * proportion, rounded down), and `returned`, the deposit less the final payout. Exact in token
 * units (the chain's transfers); micro-USD at the job's terms.
 */
export function releaseMoney(job: Pick<JobRow, 'max_cost_micro_usd' | 'max_payment' | 'settlement_amount'>, charged: Money | null): { credit: Money; returned: Money } {
  const payout = BigInt(job.settlement_amount ?? '0');
  const charge = charged ?? { microUsd: 0, units: payout };
  const finalMicroUsd =
    payout >= charge.units ? charge.microUsd : charge.units === 0n ? 0 : Number((BigInt(charge.microUsd) * payout) / charge.units);
  const returnedUnits = BigInt(job.max_payment) - payout;
  return {
    credit: { microUsd: charge.microUsd - finalMicroUsd, units: charge.units > payout ? charge.units - payout : 0n },
    returned: { microUsd: Math.max(Number(job.max_cost_micro_usd) - finalMicroUsd, 0), units: returnedUnits > 0n ? returnedUnits : 0n },
  };
}
