import { fieldDetail, type ErrorDetail } from '@gpufarm/shared';
import type { Log } from 'viem';
import { decodeEscrowLogs, sameAddress } from '../chain/escrow.js';
import { escrowJobKey } from './escrow-key.js';

/** What a job's funding must show on chain. */
export interface ExpectedFunding {
  escrow: string;
  jobId: string;
  jobKey: string;
  /** The key owner's primary wallet. */
  customer: string;
  token: string;
  amount: bigint;
  jobHash: string;
}

export interface FundingLog {
  logIndex: number;
  customer: string;
  token: string;
  amount: bigint;
  jobKey: string;
}

/**
 * Checks a mined transaction's receipt against a job's escrow terms (pure). The funding is a
 * `JobFunded` log emitted by our escrow whose job key is the job's; a log for this job sent
 * from another wallet (the key derives from the sender) is reported on `customer`. Every
 * mismatch becomes one detail naming its field: `status`, `event`, `contract`, `jobKey`,
 * `customer`, `token`, `amount`, `jobHash`.
 */
export function checkFunding(
  receipt: { status: 'success' | 'reverted'; logs: readonly Log[] },
  expected: ExpectedFunding,
): { ok: true; log: FundingLog } | { ok: false; details: ErrorDetail[] } {
  if (receipt.status !== 'success') {
    return { ok: false, details: [fieldDetail('status', 'the transaction reverted; nothing was escrowed')] };
  }
  const funded = decodeEscrowLogs(receipt.logs).filter((e) => e.eventName === 'JobFunded');
  if (funded.length === 0) {
    return { ok: false, details: [fieldDetail('event', 'the transaction emitted no JobFunded event')] };
  }
  const ours = funded.filter((e) => sameAddress(e.address, expected.escrow));
  if (ours.length === 0) {
    return {
      ok: false,
      details: [fieldDetail('contract', `the JobFunded event was emitted by ${funded[0]!.address}, not by the escrow ${expected.escrow}`)],
    };
  }
  // This job's log, or one for this job sent from another wallet (its key is derived from the sender).
  const log =
    ours.find((e) => sameAddress(e.args.jobKey, expected.jobKey)) ??
    ours.find((e) => sameAddress(escrowJobKey(e.args.customer, expected.jobId), e.args.jobKey));
  if (!log) {
    return { ok: false, details: [fieldDetail('jobKey', `the transaction funds escrow job ${ours[0]!.args.jobKey}, not this job (${expected.jobKey})`)] };
  }
  const details: ErrorDetail[] = [];
  if (!sameAddress(log.args.customer, expected.customer)) {
    details.push(fieldDetail('customer', `funded from ${log.args.customer}; the job must be funded from the API key owner's wallet ${expected.customer}`));
  }
  if (!sameAddress(log.args.token, expected.token)) {
    details.push(fieldDetail('token', `paid in ${log.args.token}; the job's terms are in ${expected.token}`));
  }
  if (log.args.amount !== expected.amount) {
    details.push(fieldDetail('amount', `${log.args.amount} base units escrowed; the job's maxPayment is ${expected.amount}`));
  }
  if (!sameAddress(log.args.jobHash, expected.jobHash)) {
    details.push(fieldDetail('jobHash', `${log.args.jobHash} does not match the job's terms (${expected.jobHash})`));
  }
  if (details.length > 0) return { ok: false, details };
  return { ok: true, log: { logIndex: log.logIndex, customer: log.args.customer, token: log.args.token, amount: log.args.amount, jobKey: log.args.jobKey } };
}
