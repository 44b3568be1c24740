import {
  createPublicClient,
  createWalletClient,
  custom,
  defineChain,
  http,
  nonceManager,
  type Account,
  type Address,
  type Chain,
  type PublicClient,
  type Transport,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

/** The escrow deployment the control plane talks to, through viem. */
export interface EscrowChain {
  chainId: number;
  rpcUrl: string;
  escrowAddress: Address;
  publicClient: PublicClient<Transport, Chain>;
  /** The operator's wallet (completeJob, authorizeRefund, release…); null when no key is configured. */
  operator: WalletClient<Transport, Chain, Account> | null;
  /** Blocks a funding transaction needs (1: mined) before fund-confirm accepts it. */
  confirmations: number;
}

export interface ConnectChainOptions {
  rpcUrl: string;
  chainId: number;
  escrowAddress: Address;
  /** The operator key as 0x + 64 hex digits; never logged. */
  operatorPrivateKey: `0x${string}` | null;
  confirmations?: number;
  /** Per-request RPC timeout; a chain that does not answer counts as down. */
  timeoutMs?: number;
}

/** viem's chain description for a chain we know only by id and RPC URL. */
export function chainFor(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: `gpufarm chain ${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

/** Connects the public client and the operator wallet; no request is made until one is used. */
export function connectChain(options: ConnectChainOptions): EscrowChain {
  const chain = chainFor(options.chainId, options.rpcUrl);
  const transport = http(options.rpcUrl, { timeout: options.timeoutMs ?? 3_000, retryCount: 0 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 250 });
  const operator = options.operatorPrivateKey
    ? createWalletClient({ chain, transport, account: privateKeyToAccount(options.operatorPrivateKey, { nonceManager }) })
    : null;
  return {
    chainId: options.chainId,
    rpcUrl: options.rpcUrl,
    escrowAddress: options.escrowAddress,
    publicClient,
    operator,
    confirmations: options.confirmations ?? 1,
  };
}

/**
 * A public client for a deployment with no chain configured: every request fails, so what needs
 * the chain (a contract wallet's signature) is refused and what does not (recovering a key's
 * signature) still works.
 */
export function offlineChainClient(chainId: number): PublicClient<Transport, Chain> {
  return createPublicClient({
    chain: chainFor(chainId, 'http://chain.invalid'),
    transport: custom({
      request: async () => {
        throw new Error('no chain RPC is configured (GF_RPC_URL and GF_ESCROW_ADDRESS)');
      },
    }),
  });
}
