import { useMemo } from 'react';
import { Router } from 'wouter';
import { WagmiProvider } from 'wagmi';
import { CustomerArea } from './areas/customer/routes';
import { useServiceIndex } from './lib/index';
import { chainOf, createWalletConfig } from './lib/wallet';
import { ErrorState, Loading } from './ui/states';

/**
 * The dashboard: the service index first (its chain id configures the wallet), then the areas
 * under `/dashboard`. The operator and admin areas join the customer's here, sharing `ui/`.
 */
export function App() {
  const index = useServiceIndex();
  const config = useMemo(() => (index.data ? createWalletConfig(chainOf(index.data)) : null), [index.data]);
  if (index.isError) {
    return (
      <main className="main">
        <ErrorState error={index.error} title="The dashboard could not reach the server" retry={() => void index.refetch()} />
      </main>
    );
  }
  if (!config) {
    return (
      <main className="main">
        <Loading label="Loading the dashboard…" />
      </main>
    );
  }
  return (
    <WagmiProvider config={config}>
      <Router base="/dashboard">
        <CustomerArea />
      </Router>
    </WagmiProvider>
  );
}
