import type { FundConfirmResponse } from '@gpufarm/shared';
import type { GfClient } from '../client.js';
import { GfError } from '../errors.js';
import { fundJob, type FundStep } from '../fund.js';
import type { Context } from './context.js';
import { WalletError } from './exit.js';
import type { StatusLine } from './spinner.js';
import { loadWalletKey, openWallet } from './wallet.js';

/** What each funding step looks like on the status line. */
function stepText(jobId: string, step: FundStep): string {
  switch (step.kind) {
    case 'funding':
      return `job ${jobId}: ${step.funding.calls.length} funding call(s) from ${step.funding.signer} on chain ${step.chainId}`;
    case 'skipped':
      return `job ${jobId}: "${step.call.title}" skipped (the allowance ${step.allowance} already covers it)`;
    case 'sent':
      return `job ${jobId}: "${step.call.title}" sent (${step.hash}), waiting for its receipt`;
    case 'mined':
      return `job ${jobId}: "${step.call.title}" mined in block ${step.blockNumber}`;
    case 'pending':
      return `job ${jobId}: funding seen, waiting for its confirmation`;
    case 'confirmed':
      return `job ${jobId}: funded, ${step.answer.job.status}`;
  }
}

/**
 * Loads the wallet key (before anything is created or sent, so a bad key file fails first) and
 * answers the function that funds a job with it. A chain-side failure that is not an API answer
 * (a refused or reverted transaction, an RPC down) becomes a wallet error (exit 5).
 */
export async function prepareFunding(ctx: Context, options: { keyFile: string | undefined; rpcUrl: string | undefined }) {
  const key = await loadWalletKey(options.keyFile);
  return async (client: GfClient, jobId: string, status: StatusLine): Promise<FundConfirmResponse> => {
    const { chainId } = await client.index();
    const wallet = await openWallet(key, chainId, ctx.rpcUrl(options.rpcUrl));
    try {
      return await fundJob(client, jobId, wallet, { onStep: (step) => status.set(stepText(jobId, step)) });
    } catch (err) {
      if (err instanceof GfError && (err.status !== null || err.code !== 'conflict')) throw err;
      const message = err instanceof GfError ? err.message : ((err as { shortMessage?: string }).shortMessage ?? (err instanceof Error ? err.message.split('\n')[0]! : String(err)));
      throw new WalletError(`Funding job ${jobId} failed on the chain: ${message}`, `Check the wallet's balance and the RPC, then run gf jobs fund ${jobId}.`, { cause: err });
    }
  };
}
