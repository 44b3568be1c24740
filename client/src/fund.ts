import type { FundConfirmPending, FundConfirmResponse, Funding, FundingCall, Job } from '@gpufarm/shared';
import type * as FundViem from './fund-viem.js';
import type { Account, Address, Chain, Hash, Hex, PublicClient, Transport, WalletClient } from 'viem';
import { GfError } from './errors.js';
import { sleep } from './transport.js';
import { errorText } from '@gpufarm/shared';

/** The parts of a client `fundJob` calls (a `GfClient` has them). */
export interface FundingApi {
  index: () => Promise<{ chainId: number }>;
  jobs: {
    funding: (jobId: string) => Promise<Funding>;
    fundConfirm: (jobId: string, txHash: string) => Promise<FundConfirmResponse | FundConfirmPending>;
  };
}

/** Progress of `fundJob`, in order, for output. */
export type FundStep =
  | { kind: 'funding'; funding: Funding; chainId: number }
  | { kind: 'skipped'; call: FundingCall; allowance: bigint }
  | { kind: 'sent'; call: FundingCall; hash: Hash }
  | { kind: 'mined'; call: FundingCall; hash: Hash; blockNumber: bigint }
  | { kind: 'pending'; answer: FundConfirmPending; retryInMs: number }
  | { kind: 'confirmed'; answer: FundConfirmResponse };

export interface FundJobOptions {
  /** Reads allowances and waits for receipts; by default a client over the wallet's own transport. */
  publicClient?: PublicClient;
  onStep?: (step: FundStep) => void;
  /** Stops between steps (a transaction already sent stays sent). */
  signal?: AbortSignal;
  /** How long fund-confirm may keep answering 202 before `timeout`; 5 minutes by default. */
  confirmTimeoutMs?: number;
}

export type FundingWallet = WalletClient<Transport, Chain | undefined, Account | undefined>;

/**
 * The gas limit a funding call is sent with: the estimate and half again, as browser wallets add.
 * An estimate holds only for the state it ran on, and the escrow's token balance can change
 * before the call is mined (a release the service sends empties it): `transferFrom` then writes
 * that balance from zero, 17,100 gas more, the escrow's token call runs out of gas and the
 * funding reverts. Unused gas is not charged.
 */
export function fundingGasLimit(estimate: bigint): bigint {
  return estimate + estimate / 2n;
}

const CONFIRM_FIRST_PAUSE_MS = 500;
const CONFIRM_MAX_PAUSE_MS = 5_000;

const firstLine = (err: unknown) => {
  const short = (err as { shortMessage?: unknown }).shortMessage;
  return typeof short === 'string' ? short : errorText(err).split('\n')[0]!;
};

// viem (several hundred modules) is loaded when a job is funded, not by every program or `gf`
// command that imports the client.
type Viem = typeof FundViem;

/** The spender and amount of an ERC-20 `approve` call; null for any other call. */
function approveOf({ decodeFunctionData, erc20Abi }: Viem, call: FundingCall): { spender: Address; amount: bigint } | null {
  try {
    const decoded = decodeFunctionData({ abi: erc20Abi, data: call.data as Hex });
    if (decoded.functionName !== 'approve') return null;
    const [spender, amount] = decoded.args;
    return { spender, amount };
  } catch {
    return null;
  }
}

/**
 * Funds a job's escrow from `wallet` and confirms it: reads `GET /v1/jobs/:id/funding`, checks
 * before sending anything that the wallet is on the deployment's chain (`wrong_chain`) and is
 * the funding's `signer` (`wallet_mismatch`), sends the calls in order and waits for each
 * receipt (an `approve` the on-chain allowance already covers is skipped), then calls
 * `fund-confirm` with the last hash, again after a growing pause while it answers 202 (pending).
 * Answers the confirmation (the job is then `QUEUED`).
 */
export async function fundJob(api: FundingApi, job: string | Pick<Job, 'id'>, wallet: FundingWallet, options: FundJobOptions = {}): Promise<FundConfirmResponse> {
  const jobId = typeof job === 'string' ? job : job.id;
  const { signal, onStep } = options;
  const [funding, index, viem] = await Promise.all([api.jobs.funding(jobId), api.index(), import('./fund-viem.js')]);
  const { createPublicClient, custom, erc20Abi, isAddressEqual } = viem;
  onStep?.({ kind: 'funding', funding, chainId: index.chainId });

  let walletChainId: number;
  try {
    walletChainId = await wallet.getChainId();
  } catch (err) {
    throw new GfError('network_error', `The wallet's chain did not answer its chain id (${firstLine(err)}). Check the wallet's RPC and try again; nothing was sent.`, { retryable: true, cause: err });
  }
  if (walletChainId !== index.chainId || (wallet.chain && wallet.chain.id !== index.chainId)) {
    throw new GfError('wrong_chain', `The wallet is on chain ${walletChainId}${wallet.chain && wallet.chain.id !== walletChainId ? ` (configured for ${wallet.chain.id})` : ''}, but this deployment's escrow is on chain ${index.chainId}. Switch the wallet to chain ${index.chainId} and run the funding again; nothing was sent.`, {
      details: [{ field: 'chainId', message: `is ${walletChainId}, must be ${index.chainId}` }],
    });
  }
  const account = wallet.account ?? (await wallet.getAddresses())[0];
  const address = typeof account === 'string' ? account : account?.address;
  if (!address || !isAddressEqual(address, funding.signer as Address)) {
    throw new GfError('wallet_mismatch', `Job ${jobId} must be funded by ${funding.signer} (the wallet of the API key's account), but the wallet is ${address ?? 'without an account'}. Use that wallet, or a key of this wallet's account; nothing was sent.`, {
      details: [{ field: 'signer', message: `is ${funding.signer}, the wallet is ${address ?? 'none'}` }],
    });
  }

  const reader = options.publicClient ?? createPublicClient({ chain: wallet.chain, transport: custom(wallet), pollingInterval: 500 });
  let lastHash: Hash | null = null;
  for (const call of funding.calls) {
    if (signal?.aborted) throw signal.reason;
    const approve = approveOf(viem, call);
    if (approve) {
      const allowance = await reader.readContract({ address: call.to as Address, abi: erc20Abi, functionName: 'allowance', args: [address, approve.spender] });
      if (allowance >= approve.amount) {
        onStep?.({ kind: 'skipped', call, allowance });
        continue;
      }
    }
    let hash: Hash;
    try {
      const request = { to: call.to as Address, data: call.data as Hex, value: BigInt(call.value) };
      const gas = fundingGasLimit(await reader.estimateGas({ account: address, ...request }));
      hash = await wallet.sendTransaction({ account: account!, chain: wallet.chain ?? null, ...request, gas });
    } catch (err) {
      throw new GfError('unavailable', `Sending "${call.title}" failed: ${firstLine(err)}. ${lastHash ? `Earlier calls were mined (last ${lastHash}); ` : ''}run the funding again: calls already done are not repeated.`, { retryable: true, cause: err });
    }
    onStep?.({ kind: 'sent', call, hash });
    const receipt = await reader.waitForTransactionReceipt({ hash });
    if (receipt.status !== 'success') {
      throw new GfError('conflict', `"${call.title}" reverted on chain (transaction ${hash}). Check the wallet's balance and the job's status (GET /v1/jobs/${jobId}); nothing after this call was sent.`, { details: [{ field: 'txHash', message: `${hash} reverted` }] });
    }
    onStep?.({ kind: 'mined', call, hash, blockNumber: receipt.blockNumber });
    lastHash = hash;
  }
  if (!lastHash) throw new GfError('invalid_response', `The funding of job ${jobId} has no call left to send. Check that the client and the server versions match.`);

  const deadline = Date.now() + (options.confirmTimeoutMs ?? 300_000);
  for (let pause = CONFIRM_FIRST_PAUSE_MS; ; pause = Math.min(CONFIRM_MAX_PAUSE_MS, Math.round(pause * 1.5))) {
    let answer: FundConfirmResponse | FundConfirmPending | null = null;
    try {
      answer = await api.jobs.fundConfirm(jobId, lastHash);
    } catch (err) {
      // fund-confirm is idempotent: a lost answer or a passing outage is asked again.
      if (!(err instanceof GfError && err.retryable) || Date.now() + pause > deadline) throw err;
    }
    if (answer === null) {
      await sleep(pause, signal);
      continue;
    }
    if (answer.status === 'confirmed') {
      onStep?.({ kind: 'confirmed', answer });
      return answer;
    }
    if (Date.now() + pause > deadline) {
      throw new GfError('timeout', `The funding transaction ${lastHash} of job ${jobId} is not confirmed yet (${answer.confirmations} of ${answer.requiredConfirmations} confirmations). Confirm it later with POST /v1/jobs/${jobId}/fund-confirm; nothing needs sending again.`, { retryable: true });
    }
    onStep?.({ kind: 'pending', answer, retryInMs: pause });
    await sleep(pause, signal);
  }
}
