import { lazy, Suspense } from 'react';
import { Redirect, Route, Switch } from 'wouter';
import { useSession } from '../../lib/session';
import { AppShell, RequireSession, type NavItem } from '../../ui/app-shell';
import { EmptyState, Loading } from '../../ui/states';
import { BillingPage } from './billing-page';
import { CapacityPage } from './capacity-page';
import { JobsPage } from './jobs-page';
import { KeysPage } from './keys-page';

// The job page (wallet actions, logs, verification) and sign-in (SIWE) load on first visit.
const JobPage = lazy(() => import('./job-page'));
const SignInPage = lazy(() => import('./sign-in-page'));

const NAV: NavItem[] = [
  { href: '/jobs', label: 'Jobs' },
  { href: '/keys', label: 'API keys' },
  { href: '/billing', label: 'Billing' },
  { href: '/capacity', label: 'Capacity' },
];

function Home() {
  const session = useSession();
  if (session.isPending) return <Loading />;
  return <Redirect to={session.data ? '/jobs' : '/sign-in'} replace />;
}

/** The customer's pages under `/dashboard`. */
export function CustomerArea() {
  return (
    <AppShell area="dashboard" nav={NAV}>
      <Suspense fallback={<Loading />}>
        <Switch>
          <Route path="/" component={Home} />
          <Route path="/sign-in" component={SignInPage} />
          <Route path="/capacity" component={CapacityPage} />
          <Route path="/keys">
            <RequireSession>
              <KeysPage />
            </RequireSession>
          </Route>
          <Route path="/jobs">
            <RequireSession>
              <JobsPage />
            </RequireSession>
          </Route>
          <Route path="/jobs/:id">
            {(params) => (
              <RequireSession>
                <JobPage id={params.id} />
              </RequireSession>
            )}
          </Route>
          <Route path="/billing">
            <RequireSession>
              <BillingPage />
            </RequireSession>
          </Route>
          <Route>
            <EmptyState title="No such page">
              <p>Use the navigation above, or go to your jobs.</p>
            </EmptyState>
          </Route>
        </Switch>
      </Suspense>
    </AppShell>
  );
}
