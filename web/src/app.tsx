import { lazy, Suspense, useMemo } from 'react';
import { Redirect, Route, Router, Switch } from 'wouter';
import { WagmiProvider } from 'wagmi';
import { CustomerArea } from './areas/customer/routes';
import { useServiceIndex } from './lib/index';
import { chainOf, createWalletConfig } from './lib/wallet';
import { ErrorState, Loading } from './ui/states';

// Operators and admins are few: their areas (and the chart library) load only when opened, so
// the customer's first load does not carry them.
const OperatorArea = lazy(() => import('./areas/operator/routes'));
const AdminArea = lazy(() => import('./areas/admin/routes'));

/**
 * The web app: the service index first (its chain id configures the wallet), then the area the
 * path names: `/dashboard` (customers), `/operator` (farm operators), `/admin` (admins), each a
 * nested router sharing `ui/` and the one session.
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
      <Router>
        <Suspense
          fallback={
            <main className="main">
              <Loading />
            </main>
          }
        >
          <Switch>
            <Route path="/operator" nest>
              <OperatorArea />
            </Route>
            <Route path="/admin" nest>
              <AdminArea />
            </Route>
            <Route path="/dashboard" nest>
              <CustomerArea />
            </Route>
            <Route>
              <Redirect to="/dashboard/" replace />
            </Route>
          </Switch>
        </Suspense>
      </Router>
    </WagmiProvider>
  );
}
