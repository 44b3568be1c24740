import type { FundingUnavailable } from '@gpufarm/shared';
import type { EscrowChain } from './client.js';

export type ChainHealthState = { ok: true } | ({ ok: false } & FundingUnavailable);

/** One probe of the chain RPC, for metrics: how long it took and the head block it read. */
export interface ChainProbe {
  durationSeconds: number;
  headBlock: bigint | null;
}

/**
 * The chain's health as last probed, refreshed in the background so request paths never wait on
 * the RPC to learn it: the RPC answers with the configured chain id and the escrow has code.
 */
export interface ChainHealth {
  current(): ChainHealthState;
  /** The last probe's round trip and the head block it saw (null: it failed before reading it). */
  lastProbe(): ChainProbe | null;
  /** Probes now and updates `current()`. */
  refresh(): Promise<ChainHealthState>;
  close(): void;
}

/** A probe of `chain` every `intervalMs`; the first probe runs before it resolves. */
export async function startChainHealth(chain: EscrowChain, options: { intervalMs: number }): Promise<ChainHealth> {
  let state: ChainHealthState = { ok: false, code: 'chain_unavailable', message: 'The chain has not been probed yet.' };
  let closed = false;
  let last: ChainProbe | null = null;
  const probe = async (): Promise<ChainHealthState> => {
    const started = performance.now();
    const done = (headBlock: bigint | null) => (last = { durationSeconds: (performance.now() - started) / 1000, headBlock });
    try {
      const chainId = await chain.publicClient.getChainId();
      if (chainId !== chain.chainId) {
        return { ok: false, code: 'wrong_chain', message: `The chain RPC serves chain ${chainId}, not ${chain.chainId}; funding is paused.` };
      }
      const code = await chain.publicClient.getCode({ address: chain.escrowAddress });
      if (!code || code === '0x') {
        return { ok: false, code: 'escrow_not_deployed', message: `No escrow contract at ${chain.escrowAddress} on chain ${chain.chainId}; funding is paused.` };
      }
      done(await chain.publicClient.getBlockNumber({ cacheTime: 0 }));
      return { ok: true };
    } catch {
      done(null);
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
    lastProbe: () => last,
    refresh,
    close: () => {
      closed = true;
      clearInterval(timer);
    },
  };
}
