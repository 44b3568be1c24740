import type { ServiceIndex } from '@gpufarm/shared';
import { defineChain, type Chain } from 'viem';
import { createConfig, injected, unstable_connector, type Config } from 'wagmi';

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
 * connected wallet's provider (`unstable_connector(injected)`), so no RPC URL is needed.
 */
export function createWalletConfig(chain: Chain): Config {
  return createConfig({
    chains: [chain],
    multiInjectedProviderDiscovery: true,
    connectors: [injected({ target: { id: BROWSER_WALLET_ID, name: 'Browser wallet', provider: (w) => w?.ethereum } })],
    transports: { [chain.id]: unstable_connector(injected) },
  });
}
