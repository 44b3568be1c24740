import { errorText, type FundConfirmResponse } from '@gpufarm/shared';
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
 * answers the function that funds a job with it. A failure while the funding calls go to the
 * chain (the RPC down, a refused or reverted transaction) is a wallet error (exit 5), as are
 * `wallet_mismatch` and `wrong_chain`; the API's answers before and after keep their codes.
 */
export async function prepareFunding(ctx: Context, options: { keyFile: string | undefined; rpcUrl: string | undefined }) {
  const key = await loadWalletKey(options.keyFile);
  return async (client: GfClient, jobId: string, status: StatusLine): Promise<FundConfirmResponse> => {
    const { chainId } = await client.index();
    const wallet = await openWallet(key, chainId, ctx.rpcUrl(options.rpcUrl));
    // Calls still to send or skip; null until the funding calls are known.
    let callsLeft: number | null = null;
    const onStep = (step: FundStep) => {
      if (step.kind === 'funding') callsLeft = step.funding.calls.length;
      if (step.kind === 'mined' || step.kind === 'skipped') callsLeft = (callsLeft ?? 1) - 1;
      status.set(stepText(jobId, step));
    };
    try {
      return await fundJob(client, jobId, wallet, { onStep });
    } catch (err) {
      const onChain = callsLeft !== null && callsLeft > 0;
      if (!onChain || (err instanceof GfError && (err.code === 'wallet_mismatch' || err.code === 'wrong_chain'))) throw err;
      // viem's errors carry a one-line shortMessage; anything else, its first line.
      const message = (err instanceof Error ? (err as { shortMessage?: string }).shortMessage : undefined) ?? errorText(err).split('\n')[0]!;
      throw new WalletError(`Funding job ${jobId} failed on the chain: ${message}`, `Check the wallet's balance and the RPC (${ctx.rpcUrl(options.rpcUrl)}), then run gf jobs fund ${jobId}.`, { cause: err });
    }
  };
}
