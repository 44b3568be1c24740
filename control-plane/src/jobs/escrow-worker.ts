import type { Hex } from 'viem';
import { gpuFarmEscrowAbi } from '@gpufarm/shared';
import { readEscrowJob } from '../chain/escrow.js';
import { runSteps, startPeriodic, type Periodic } from '../background/periodic.js';
import { withAdvisoryLock } from '../db/advisory-lock.js';
import type { Database } from '../db/database.js';
import { insertBillingEntry } from '../billing/store.js';
import { readSetting, writeSetting } from '../settings/store.js';
import type { EscrowDeps } from './funding.js';
import { withParties } from './deferred-payments.js';
import { insertDeferredPayments, markWithdrawn } from './deferred-payments-store.js';
import { authorizePendingRefund, DISPUTE_TIMED_OUT, endExpiredDispute, recordRelease, releaseCompleted } from './settlement.js';
import {
  findJobByEscrowKey,
  insertCredit,
  listCreditsToRecheck,
  listDisputeTimeoutsDue,
  listPendingRefunds,
  listReleasesDue,
  markCreditReorged,
  type JobRow,
  recordLateFunding,
  updateEscrowRecord,
} from './store.js';
import { silentLogger, type Logger } from '../logger.js';

/** Blocks read per event scan request. */
const SCAN_STEP = 2_000n;
const BATCH = 50;

export interface EscrowWorkerDeps {
  db: Database;
  escrow: EscrowDeps;
  /** First block to scan on a fresh database (the escrow's deployment block). */
  startBlock: number;
  now?: () => Date;
  /**
   * A pending refund is left alone this long after its job last changed, so a cancel's own
   * authorization goes first instead of waiting on the operator lock with the worker (the
   * ledger sends it once either way; default 0).
   */
  refundGraceMs?: number;
  /** Where failed passes are logged (`loop: 'escrow worker'`); default nowhere. */
  log?: Logger;
}

const cursorKey = (deps: Pick<EscrowWorkerDeps, 'escrow'>) => `escrow_scan:${deps.escrow.chain.chainId}:${deps.escrow.chain.escrowAddress}`;

/** The last block the event scan finished (any replica's), or null before its first scan: the worker's lag is the head less this. */
export async function lastScannedBlock(deps: Pick<EscrowWorkerDeps, 'db' | 'escrow'>): Promise<bigint | null> {
  const saved = await readSetting(deps.db, cursorKey(deps));
  return saved === null ? null : BigInt(saved);
}

/**
 * Reads the escrow's events since the last scan and records what they mean for our jobs:
 * a JobFunded for a job that was canceled or expired before its funding arrived is credited and
 * its refund queued (never lost); RefundClaimed fills `receipt.transactions.refund` with a
 * `refund` billing entry; JobDisputed (with its deadline), DisputeResolved, DisputeTimedOut and
 * JobReleased (the customer's approve, anyone's release) update the receipt; PaymentDeferred
 * records a payout left in the escrow and Withdrawn settles the recipient's deferrals before it.
 * Returns the last block scanned.
 */
export async function scanEscrowEvents(deps: EscrowWorkerDeps): Promise<bigint> {
  const { chain } = deps.escrow;
  const saved = await readSetting(deps.db, cursorKey(deps));
  let from = saved !== null ? BigInt(saved) + 1n : BigInt(deps.startBlock);
  const latest = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
  // Stay `confirmations - 1` blocks behind the head, as fund-confirm does.
  const head = latest - BigInt(chain.confirmations - 1);
  while (from <= head) {
    const to = from + SCAN_STEP - 1n < head ? from + SCAN_STEP - 1n : head;
    const events = await chain.publicClient.getContractEvents({ address: chain.escrowAddress, abi: gpuFarmEscrowAbi, fromBlock: from, toBlock: to, strict: true });
    const now = deps.now ?? (() => new Date());
    for (const event of events) {
      if (event.eventName === 'Withdrawn') {
        // It names an account, not a job: the account took its whole credit in the token.
        const { account, token } = event.args;
        await markWithdrawn(deps.db, { chainId: chain.chainId, escrowAddress: chain.escrowAddress, account, token, txHash: event.transactionHash, blockNumber: event.blockNumber, logIndex: event.logIndex, at: now() });
        continue;
      }
      if (!('jobKey' in event.args)) continue;
      const job = await findJobByEscrowKey(deps.db, event.args.jobKey as string);
      if (!job) continue;
      const txHash = event.transactionHash.toLowerCase() as Hex;
      switch (event.eventName) {
        case 'JobFunded':
          if ((job.status === 'CANCELED' || job.status === 'EXPIRED') && !job.fund_tx_hash && event.args.customer) {
            await deps.db.transaction(async (tx) => {
              const credit = await insertCredit(tx, {
                chainId: chain.chainId,
                txHash,
                logIndex: event.logIndex,
                jobId: job.id,
                jobKey: event.args.jobKey,
                customer: event.args.customer!,
                token: event.args.token!,
                amount: event.args.amount!.toString(),
                blockNumber: event.blockNumber,
                blockHash: event.blockHash,
              });
              if (credit) await recordLateFunding(tx, { jobId: job.id, fundTxHash: txHash });
            });
          }
          break;
        case 'RefundClaimed':
          await deps.db.transaction(async (tx) => {
            const row = await updateEscrowRecord(tx, job.id, { refund_status: 'claimed', refund_tx_hash: txHash });
            if (row && job.refund_status !== 'claimed') {
              await insertBillingEntry(tx, { accountId: job.account_id, type: 'refund', jobId: job.id, amountMicroUsd: job.max_cost_micro_usd, token: job.payment_token, amount: event.args.amount!.toString(), txHash });
            }
          });
          break;
        case 'JobDisputed':
          await updateEscrowRecord(
            deps.db,
            job.id,
            { settlement_status: 'disputed', dispute_tx_hash: txHash, disputed_at: now(), dispute_ends_at: new Date(Number(event.args.disputeEndsAt) * 1000) },
            { settlementStatus: 'completed' },
          );
          break;
        // Both come right before the JobReleased of the same transaction, which records the release.
        case 'DisputeResolved':
          await updateEscrowRecord(deps.db, job.id, { settlement_amount: event.args.payout.toString(), settlement_fee: event.args.fee.toString(), dispute_outcome: 'resolved' }, { settlementStatus: 'disputed' });
          break;
        case 'DisputeTimedOut':
          await updateEscrowRecord(deps.db, job.id, DISPUTE_TIMED_OUT, { settlementStatus: 'disputed' });
          break;
        case 'JobReleased': {
          // The release's deferrals follow it in the same transaction: recorded with it, in one
          // database transaction, so no reader sees the job released without them.
          const deferred = events.flatMap((e) =>
            e.eventName === 'PaymentDeferred' && e.transactionHash === event.transactionHash && e.args.jobKey === event.args.jobKey
              ? [{ ...e.args, txHash: e.transactionHash, logIndex: e.logIndex, blockNumber: e.blockNumber }]
              : [],
          );
          const escrowJob = deferred.length > 0 ? await readEscrowJob(chain, event.args.jobKey) : null;
          await deps.db.transaction(async (tx) => {
            if (!job.release_tx_hash) await recordRelease(tx, job, txHash);
            if (escrowJob) await insertDeferredPayments(tx, { chainId: chain.chainId, escrowAddress: chain.escrowAddress, jobId: job.id, payments: withParties(escrowJob, deferred) });
          });
          break;
        }
        case 'PaymentDeferred': {
          // Recorded with its release above, which the same transaction logged first.
          if (events.some((e) => e.eventName === 'JobReleased' && e.transactionHash === event.transactionHash && e.args.jobKey === event.args.jobKey)) break;
          const escrowJob = await readEscrowJob(chain, event.args.jobKey);
          const log = { ...event.args, txHash: event.transactionHash, logIndex: event.logIndex, blockNumber: event.blockNumber };
          await insertDeferredPayments(deps.db, { chainId: chain.chainId, escrowAddress: chain.escrowAddress, jobId: job.id, payments: withParties(escrowJob, [log]) });
          break;
        }
        default:
          break;
      }
    }
    await writeSetting(deps.db, cursorKey(deps), to.toString());
    from = to + 1n;
  }
  return head;
}

/**
 * Holds jobs whose funding vanished: for each credit of a job that has not run yet, the block at
 * the credit's number must still have the credit's hash. A changed hash (a reorg dropped or moved
 * the log) marks the credit `reorged` and sets `funding_hold`; the matcher skips held jobs.
 * Returns the ids of jobs held now.
 */
export async function checkReorgs(deps: EscrowWorkerDeps): Promise<string[]> {
  const { chain } = deps.escrow;
  const held: string[] = [];
  for (const credit of await listCreditsToRecheck(deps.db, chain.chainId)) {
    const block = await chain.publicClient.getBlock({ blockNumber: BigInt(credit.block_number) }).catch(() => null);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: credit.tx_hash as Hex }).catch(() => null);
    const intact = block?.hash?.toLowerCase() === credit.block_hash && receipt?.blockHash.toLowerCase() === credit.block_hash;
    if (intact) continue;
    await deps.db.transaction(async (tx) => {
      await markCreditReorged(tx, { chainId: credit.chain_id, txHash: credit.tx_hash, logIndex: credit.log_index });
      await updateEscrowRecord(tx, credit.job_id, { funding_hold: `funding transaction ${credit.tx_hash} is no longer in block ${credit.block_number} (chain reorganisation); the job is held` });
    });
    held.push(credit.job_id);
  }
  return held;
}

/** Authorizes pending refunds on the escrow (cancels and late fundings). */
export async function sweepRefunds(deps: EscrowWorkerDeps): Promise<number> {
  let done = 0;
  for (const job of await listPendingRefunds(deps.db, { limit: BATCH, untouchedForMs: deps.refundGraceMs ?? 0 })) {
    const after = await authorizePendingRefund({ db: deps.db, escrow: deps.escrow }, job);
    if (after.refund_status !== 'pending') done++;
  }
  return done;
}

/** Runs `act` on each job `due` lists now (a batch); answers how many it ran on. */
async function sweepDue(deps: EscrowWorkerDeps, due: (db: Database, now: Date, limit: number) => Promise<JobRow[]>, act: (deps: { db: Database; escrow: EscrowDeps }, job: JobRow) => Promise<unknown>): Promise<number> {
  const jobs = await due(deps.db, (deps.now ?? (() => new Date()))(), BATCH);
  for (const job of jobs) await act({ db: deps.db, escrow: deps.escrow }, job);
  return jobs.length;
}

/** Sends `release` for completed jobs whose challenge window ended. */
export function sweepReleases(deps: EscrowWorkerDeps): Promise<number> {
  return sweepDue(deps, listReleasesDue, releaseCompleted);
}

/** Sends `claimDisputeTimeout` for disputed jobs whose deadline passed without a resolution. */
export function sweepDisputeTimeouts(deps: EscrowWorkerDeps): Promise<number> {
  return sweepDue(deps, listDisputeTimeoutsDue, endExpiredDispute);
}

/**
 * One pass of every sweep; a failing sweep does not stop the others, and the pass then throws
 * naming it. One replica at a time runs a pass (a database lock per escrow); a replica that finds
 * it taken skips its tick, so the event scan's reads and writes never interleave. Answers whether
 * this replica ran the pass.
 */
export async function runEscrowWorkerOnce(deps: EscrowWorkerDeps): Promise<boolean> {
  if (!deps.escrow.health.current().ok) return false;
  const { chain } = deps.escrow;
  const pass = await withAdvisoryLock(deps.db, `escrow worker:${chain.chainId}:${chain.escrowAddress.toLowerCase()}`, () => runEscrowSweeps(deps), { wait: false });
  return pass.ran;
}

async function runEscrowSweeps(deps: EscrowWorkerDeps): Promise<void> {
  await runSteps([
    ['event scan', () => scanEscrowEvents(deps)],
    ['reorg check', () => checkReorgs(deps)],
    ['refunds', () => sweepRefunds(deps)],
    ['releases', () => sweepReleases(deps)],
    ['dispute timeouts', () => sweepDisputeTimeouts(deps)],
  ]);
}

/** Runs the escrow worker every `intervalMs` until closed (one pass at a time, backing off while it fails). */
export function startEscrowWorker(deps: EscrowWorkerDeps, options: { intervalMs: number }): Periodic {
  return startPeriodic({ name: 'escrow worker', intervalMs: options.intervalMs, run: async () => void (await runEscrowWorkerOnce(deps)), log: deps.log ?? silentLogger });
}
