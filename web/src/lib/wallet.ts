import type { ServiceIndex } from '@gpufarm/shared';
import { ChainDisconnectedError, defineChain, ProviderDisconnectedError, type Chain, type EIP1193RequestFn } from 'viem';
import { createConfig, custom, injected, type Config } from 'wagmi';
import { getConnection } from 'wagmi/actions';

/** The deployment's chain as the service index describes it. No RPC URL: reads go through the wallet. */
export function chainOf(index: ServiceIndex): Chain {
  return defineChain({
    id: index.chainId,
    name: index.environment === 'local' ? `gpufarm local (${index.chainId})` : `gpufarm ${index.environment} (${index.chainId})`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    // connect-src is 'self': the page never calls a node itself; the wallet does.
    rpcUrls: { default: { http: [] } },
  });
}

/** The connector for a wallet that injects `window.ethereum` without announcing itself (EIP-6963). */
export const BROWSER_WALLET_ID = 'injected';

/**
 * wagmi for the deployment's chain: EIP-6963 discovery lists every announcing wallet, plus one
 * "Browser wallet" connector for a plain `window.ethereum`; every read goes through the
 * provider of the wallet that is connected (so no RPC URL is needed, and connect-src stays
 * 'self'). wagmi's `unstable_connector(injected)` would use the first injected connector
 * instead, which need not be the connected one.
 */
export function createWalletConfig(chain: Chain): Config {
  const request: EIP1193RequestFn = async (args) => {
    const connection = getConnection(config);
    if (connection.status !== 'connected' || !connection.connector) throw new ProviderDisconnectedError(new Error('No wallet is connected: choose your wallet on the sign-in page.'));
    if (connection.chainId !== chain.id) throw new ChainDisconnectedError(new Error(`The wallet is on chain ${connection.chainId}, not ${chain.id}: switch it to chain ${chain.id}.`));
    const provider = (await connection.connector.getProvider({ chainId: chain.id })) as { request: EIP1193RequestFn } | undefined;
    if (!provider) throw new ProviderDisconnectedError(new Error('The wallet has no provider: unlock it and reload the page.'));
    return provider.request(args);
  };
  const config: Config = createConfig({
    chains: [chain],
    multiInjectedProviderDiscovery: true,
    connectors: [injected({ target: { id: BROWSER_WALLET_ID, name: 'Browser wallet', provider: (w) => w?.ethereum } })],
    transports: { [chain.id]: custom({ request }) },
    // Local chains mine in about a second: poll receipts at that pace.
    pollingInterval: 1_000,
  });
  return config;
}
