import type { FundingUnavailable } from '@gpufarm/shared';
import type { EscrowChain } from './client.js';

export type ChainHealthState = { ok: true } | ({ ok: false } & FundingUnavailable);

/**
 * The chain's health as last probed, refreshed in the background so request paths never wait on
 * the RPC to learn it: the RPC answers with the configured chain id and the escrow has code.
 */
export interface ChainHealth {
  current(): ChainHealthState;
  /** Probes now and updates `current()`. */
  refresh(): Promise<ChainHealthState>;
  close(): void;
}

/** A probe of `chain` every `intervalMs`; the first probe runs before it resolves. */
export async function startChainHealth(chain: EscrowChain, options: { intervalMs: number }): Promise<ChainHealth> {
  let state: ChainHealthState = { ok: false, code: 'chain_unavailable', message: 'The chain has not been probed yet.' };
  let closed = false;
  const probe = async (): Promise<ChainHealthState> => {
    try {
      const chainId = await chain.publicClient.getChainId();
      if (chainId !== chain.chainId) {
        return { ok: false, code: 'wrong_chain', message: `The chain RPC serves chain ${chainId}, not ${chain.chainId}; funding is paused.` };
      }
      const code = await chain.publicClient.getCode({ address: chain.escrowAddress });
      if (!code || code === '0x') {
        return { ok: false, code: 'escrow_not_deployed', message: `No escrow contract at ${chain.escrowAddress} on chain ${chain.chainId}; funding is paused.` };
      }
      return { ok: true };
    } catch {
      return { ok: false, code: 'chain_unavailable', message: 'The chain RPC is not answering; funding calls cannot be built or confirmed now. The job keeps its terms: fetch GET /v1/jobs/{id}/funding later.' };
    }
  };
  const refresh = async () => {
    state = await probe();
    return state;
  };
  await refresh();
  const timer = setInterval(() => {
    if (!closed) void refresh();
  }, options.intervalMs);
  timer.unref();
  return {
    current: () => state,
    refresh,
    close: () => {
      closed = true;
      clearInterval(timer);
    },
  };
}
