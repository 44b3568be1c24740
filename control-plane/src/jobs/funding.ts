import { fieldDetail, type Funding, type FundingUnavailable } from '@gpufarm/shared';
import type { Address, Hex } from 'viem';
import { readAllowance } from '../chain/escrow.js';
import type { EscrowChain } from '../chain/client.js';
import { fundingCalls, ZERO_ADDRESS } from '../chain/funding-calls.js';
import type { ChainHealth } from '../chain/health.js';
import { jobHash } from '../chain/job-hash.js';
import type { Queryable } from '../db/database.js';
import { escrowJobId } from './escrow-key.js';
import { FundingError } from './funding-error.js';
import { setEscrowTerms, type JobRow } from './store.js';

/** The chain side of the jobs slice: the escrow deployment and its background health. */
export interface EscrowDeps {
  chain: EscrowChain;
  health: ChainHealth;
}

/** How long a stablecoin job's creation waits for the allowance read before keeping the approve call. */
export const ALLOWANCE_TIMEOUT_MS = 750;

export const NOT_DEPLOYED: FundingUnavailable = {
  code: 'escrow_not_deployed',
  message: 'On-chain funding is not available on this deployment: no escrow contract is configured (GF_RPC_URL, GF_ESCROW_ADDRESS). The job keeps its terms.',
};

/** The job hash for a new job's terms on `chain` (pure). */
export function termsHash(chain: EscrowChain, job: { id: string; spec_hash: string; payment_token: string; max_payment: string }): Hex {
  return jobHash({
    escrowJobId: escrowJobId(job.id),
    specHashHex: job.spec_hash,
    token: job.payment_token as Address,
    maxPayment: BigInt(job.max_payment),
    chainId: chain.chainId,
    escrow: chain.escrowAddress,
  });
}

const withTimeout = <T>(promise: Promise<T>, ms: number): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });

/**
 * The funding object for a job, or why there is none. No RPC round trip for ETH jobs: the chain's
 * health comes from the background probe. A stablecoin job reads the signer's allowance (short
 * timeout) to leave out an approve that is already covered; when the read fails, the approve stays.
 */
export async function fundingFor(
  escrow: EscrowDeps | null,
  job: Pick<JobRow, 'id' | 'payment_kind' | 'payment_token' | 'payment_symbol' | 'max_payment' | 'escrow_address' | 'job_hash'>,
  signer: string,
): Promise<{ funding: Funding; fundingUnavailable: null } | { funding: null; fundingUnavailable: FundingUnavailable }> {
  if (!escrow || !job.job_hash || !job.escrow_address) return { funding: null, fundingUnavailable: NOT_DEPLOYED };
  const health = escrow.health.current();
  if (!health.ok) return { funding: null, fundingUnavailable: { code: health.code, message: health.message } };
  const maxPayment = BigInt(job.max_payment);
  let includeApprove = job.payment_token !== ZERO_ADDRESS;
  if (includeApprove) {
    try {
      const allowance = await withTimeout(readAllowance(escrow.chain, job.payment_token as Address, signer as Address), ALLOWANCE_TIMEOUT_MS);
      includeApprove = allowance < maxPayment;
    } catch {
      // Sending an approve that was not needed costs gas, never money: keep it.
    }
  }
  return {
    funding: {
      object: 'funding',
      signer,
      calls: fundingCalls({
        escrow: job.escrow_address as Address,
        token: job.payment_token as Address,
        symbol: job.payment_symbol,
        maxPayment,
        escrowJobId: escrowJobId(job.id),
        jobHash: job.job_hash as Hex,
        includeApprove,
      }),
    },
    fundingUnavailable: null,
  };
}

/** A job created before funding opened gets its escrow terms now (once), so it can be funded. */
export async function ensureEscrowTerms(db: Queryable, escrow: EscrowDeps | null, job: JobRow): Promise<JobRow> {
  if (job.job_hash || !escrow) return job;
  return (await setEscrowTerms(db, { jobId: job.id, escrowAddress: escrow.chain.escrowAddress, jobHash: termsHash(escrow.chain, job) })) ?? job;
}

/** 503 `unavailable` unless the chain answered the last probe. */
export function requireChain(escrow: EscrowDeps | null): EscrowDeps {
  if (!escrow) throw new FundingError('unavailable', NOT_DEPLOYED.message, { details: [fieldDetail('chain', NOT_DEPLOYED.code)] });
  const health = escrow.health.current();
  if (!health.ok) throw new FundingError('unavailable', health.message, { details: [fieldDetail('chain', health.code)] });
  return escrow;
}
