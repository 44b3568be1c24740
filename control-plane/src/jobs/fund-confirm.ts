import { fieldDetail } from '@gpufarm/shared';
import { TransactionReceiptNotFoundError, type Hash, type TransactionReceipt } from 'viem';
import { insertBillingEntry } from '../billing/store.js';
import type { Database } from '../db/database.js';
import type { JobEffects } from './effects.js';
import { checkFunding } from './funding-check.js';
import { FundingError } from './funding-error.js';
import { requireChain, type EscrowDeps } from './funding.js';
import { applyTransition, findCredit, findJobById, insertCredit, notifyJobQueued, recordLateFunding, type JobRow } from './store.js';
import { transitionFor } from './transitions.js';

/** Seconds a client waits before asking again about a transaction that is not confirmed yet. */
export const RETRY_AFTER_SECONDS = 2;

export type FundConfirmOutcome =
  | { kind: 'confirmed'; job: JobRow }
  | { kind: 'pending'; job: JobRow; confirmations: number; required: number; message: string };

const chainDown = (err: unknown) => new FundingError('unavailable', 'The chain RPC did not answer; retry fund-confirm later.', { cause: err, details: [fieldDetail('chain', 'chain_unavailable')] });

/**
 * `POST /v1/jobs/:id/fund-confirm`: reads the transaction's receipt from the chain (the hash is
 * only a pointer), checks its JobFunded log against the job's terms, credits the log once
 * (unique on chain id, tx hash and log index) and moves the job CREATED -> FUNDED -> QUEUED in
 * one database transaction. Idempotent: the same transaction again, or from two requests at
 * once, moves the job once. A funding that arrives after the job was canceled is recorded and
 * its refund authorized (409 `conflict` tells the customer).
 */
export async function confirmFunding(deps: { db: Database; escrow: EscrowDeps | null; effects: Pick<JobEffects, 'serviceLine'> }, params: { job: JobRow; wallet: string; txHash: Hash }): Promise<FundConfirmOutcome> {
  const { job } = params;
  const txHash = params.txHash.toLowerCase() as Hash;
  if (job.fund_tx_hash === txHash) return alreadyRecorded(job);
  if (job.fund_tx_hash) {
    throw new FundingError('conflict', `The job is already funded by transaction ${job.fund_tx_hash}.`, { details: [fieldDetail('txHash', `the job is funded by ${job.fund_tx_hash}`)] });
  }
  if (job.status !== 'CREATED' && job.status !== 'CANCELED' && job.status !== 'EXPIRED') {
    throw new FundingError('conflict', `The job is ${job.status}; it was not waiting for funding.`, { details: [fieldDetail('status', `is ${job.status}`, { subject: true })] });
  }
  const { chain } = requireChain(deps.escrow);
  if (!job.job_hash || !job.escrow_address) throw new FundingError('unavailable', 'The job has no escrow terms yet; fetch GET /v1/jobs/{id}/funding first.');

  let receipt: TransactionReceipt;
  let latest: bigint;
  try {
    receipt = await chain.publicClient.getTransactionReceipt({ hash: txHash });
    latest = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
  } catch (err) {
    if (err instanceof TransactionReceiptNotFoundError) {
      return { kind: 'pending', job, confirmations: 0, required: chain.confirmations, message: `Transaction ${txHash} is not mined yet (or unknown to the chain); retry after ${RETRY_AFTER_SECONDS} seconds.` };
    }
    throw chainDown(err);
  }
  const confirmations = Number(latest - receipt.blockNumber + 1n);
  if (confirmations < chain.confirmations) {
    return { kind: 'pending', job, confirmations, required: chain.confirmations, message: `Transaction ${txHash} has ${confirmations} of ${chain.confirmations} confirmations; retry after ${RETRY_AFTER_SECONDS} seconds.` };
  }
  const checked = checkFunding(receipt, {
    escrow: job.escrow_address,
    jobId: job.id,
    jobKey: job.escrow_job_key,
    customer: params.wallet,
    token: job.payment_token,
    amount: BigInt(job.max_payment),
    jobHash: job.job_hash,
  });
  if (!checked.ok) {
    throw new FundingError('funding_mismatch', `Transaction ${txHash} does not fund this job: ${checked.details.map((d) => d.message).join('; ')}`, { details: checked.details });
  }

  const outcome = await deps.db.transaction(async (tx) => {
    const credit = await insertCredit(tx, {
      chainId: chain.chainId,
      txHash,
      logIndex: checked.log.logIndex,
      jobId: job.id,
      jobKey: checked.log.jobKey,
      customer: checked.log.customer,
      token: checked.log.token,
      amount: checked.log.amount.toString(),
      blockNumber: receipt.blockNumber,
      blockHash: receipt.blockHash,
    });
    if (!credit) {
      // Credited already: by a concurrent request for this job (it waited on the unique key), or never reusable.
      const existing = await findCredit(tx, { chainId: chain.chainId, txHash, logIndex: checked.log.logIndex });
      if (existing?.job_id !== job.id) {
        throw new FundingError('funding_mismatch', `Transaction ${txHash} was already used to fund another job.`, { details: [fieldDetail('txHash', 'this funding event was already credited to another job')] });
      }
      return { kind: 'replayed' as const };
    }
    const funded = await applyTransition(tx, { jobId: job.id, from: 'CREATED', to: transitionFor('CREATED', 'fund').to, fundTxHash: txHash });
    if (!funded) {
      // Canceled (or expired) before the money arrived: record it and refund it, never lose it.
      await recordLateFunding(tx, { jobId: job.id, fundTxHash: txHash });
      return { kind: 'late' as const };
    }
    await insertBillingEntry(tx, { accountId: job.account_id, type: 'funded', jobId: job.id, amountMicroUsd: job.max_cost_micro_usd, token: job.payment_token, amount: job.max_payment, txHash });
    const queued = await applyTransition(tx, { jobId: job.id, from: 'FUNDED', to: transitionFor('FUNDED', 'queue').to });
    if (!queued) throw new Error(`job ${job.id} left FUNDED inside its funding transaction`);
    await deps.effects.serviceLine(tx, job.id, `queued: the escrow holds the funding (transaction ${txHash}); waiting for a machine that fits`);
    await notifyJobQueued(tx, job.id);
    return { kind: 'moved' as const, job: queued };
  });
  if (outcome.kind === 'moved') return { kind: 'confirmed', job: outcome.job };
  const now = await findJobById(deps.db, job.id);
  if (!now) throw new Error(`job ${job.id} vanished`);
  if (outcome.kind === 'late') throw canceledWithRefund(now);
  return alreadyRecorded(now);
}

function canceledWithRefund(job: JobRow): FundingError {
  return new FundingError('conflict', `The job is ${job.status}; its funding was recorded and the escrow refund is being authorized: claim it from your wallet with claimRefund(${job.escrow_job_key}).`, {
    details: [fieldDetail('status', `is ${job.status}`, { subject: true })],
  });
}

function alreadyRecorded(job: JobRow): FundConfirmOutcome {
  if (job.status === 'CANCELED' || job.status === 'EXPIRED') throw canceledWithRefund(job);
  return { kind: 'confirmed', job };
}
