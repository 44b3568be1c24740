import { ApiError } from '@gpufarm/shared';
import type { Hex } from 'viem';
import { readEscrowJob, resolveDispute } from '../chain/escrow.js';
import type { Database } from '../db/database.js';
import { recordAudit, type AuditActor } from '../fleet/audit.js';
import type { EscrowDeps } from '../jobs/funding.js';
import { recordPayout } from '../jobs/settlement.js';
import { findJobById, updateEscrowRecord } from '../jobs/store.js';

export type DisputeOutcome = 'release' | 'refund';

/**
 * Settles a disputed job through the escrow's `resolveDispute` (sent and recorded through the
 * operator-transaction ledger): `release` pays the recorded payout and fee, `refund` pays 0 and
 * the whole deposit goes back to the customer. The job's settlement is recorded as released with
 * the resolved amount and its billing entry, as the event scan would record it.
 */
export async function resolveJobDispute(
  deps: { db: Database; escrow: EscrowDeps | null },
  input: { jobId: string; outcome: DisputeOutcome; actor: AuditActor },
): Promise<{ jobId: string; outcome: DisputeOutcome; txHash: string }> {
  const job = await findJobById(deps.db, input.jobId);
  if (!job) throw new ApiError('not_found', `No job ${input.jobId}.`);
  if (job.settlement_status !== 'disputed') {
    throw new ApiError('conflict', `Job ${input.jobId} is not in dispute (its settlement is ${job.settlement_status ?? 'not recorded'}); only a disputed job can be resolved.`);
  }
  if (!deps.escrow) throw new ApiError('unavailable', 'No escrow is configured on this deployment (GF_RPC_URL, GF_ESCROW_ADDRESS): a dispute cannot be resolved.');
  const key = job.escrow_job_key as Hex;
  const onChain = await readEscrowJob(deps.escrow.chain, key);
  if (onChain.status !== 'disputed') {
    throw new ApiError('conflict', `The escrow holds job ${input.jobId} as ${onChain.status}, not disputed; the event scan records the change shortly.`);
  }
  const latest = await deps.escrow.chain.publicClient.getBlock({ blockTag: 'latest' });
  if (latest.timestamp >= onChain.disputeEndsAt) {
    throw new ApiError('conflict', `The dispute of job ${input.jobId} passed its deadline (${new Date(Number(onChain.disputeEndsAt) * 1000).toISOString()}): the escrow now only returns the whole deposit to the customer, which the escrow worker sends.`);
  }
  const payout = input.outcome === 'release' ? onChain.payout : 0n;
  const fee = input.outcome === 'release' ? onChain.fee : 0n;
  const sent = await resolveDispute(deps.escrow.chain, { jobKey: key, payout, fee }, deps.db);
  await recordPayout({ db: deps.db, escrow: deps.escrow }, job, sent, async (tx) => {
    const resolved = await updateEscrowRecord(tx, job.id, { settlement_amount: payout.toString(), settlement_fee: fee.toString(), dispute_outcome: 'resolved' }, { settlementStatus: 'disputed' });
    await recordAudit(tx, {
      actor: input.actor,
      action: 'job.resolve_dispute',
      targetType: 'job',
      targetId: job.id,
      details: { outcome: input.outcome, payout: payout.toString(), fee: fee.toString(), txHash: sent.txHash },
    });
    return resolved;
  });
  return { jobId: job.id, outcome: input.outcome, txHash: sent.txHash };
}
