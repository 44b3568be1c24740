import { lazy, Suspense, type ComponentType } from 'react';
import { Redirect, Route, Switch } from 'wouter';
import { useSession } from '../../lib/session';
import { AppShell, RequireSession, type NavItem } from '../../ui/app-shell';
import { EmptyState, Loading } from '../../ui/states';
import { BillingPage } from './billing-page';
import { CapacityPage } from './capacity-page';
import { JobsPage } from './jobs-page';
import { KeysPage } from './keys-page';

/**
 * A lazily loaded page whose chunk can be fetched ahead of its first render. Once fetched it
 * renders directly: a lazy component suspends at its first render even when its chunk is in,
 * and React then holds the Suspense fallback on screen for up to 300 ms.
 */
function preloadablePage<P extends object>(load: () => Promise<{ default: ComponentType<P> }>) {
  let loaded: ComponentType<P> | null = null;
  let loading: Promise<{ default: ComponentType<P> }> | null = null;
  const fetchChunk = () =>
    (loading ??= load().then((module) => {
      loaded = module.default;
      return module;
    }));
  const Lazy = lazy(fetchChunk);
  function Page(props: P) {
    const Loaded = loaded;
    return Loaded ? <Loaded {...props} /> : <Lazy {...props} />;
  }
  return { Page, preload: () => void fetchChunk().catch(() => undefined) };
}

// The job page (wallet actions, logs, verification) and sign-in (SIWE) load on first visit.
const jobPage = preloadablePage(() => import('./job-page'));
const JobPage = jobPage.Page;
// A job's `links.dashboard` opens the app on its page: fetch that chunk while the session is checked.
if (window.location.pathname.startsWith(`${import.meta.env.BASE_URL}jobs/`)) jobPage.preload();
const SignInPage = lazy(() => import('./sign-in-page'));
// The New job form (the shared job schema's checks, the offers) loads on first visit.
const NewJobPage = lazy(() => import('./new-job-page'));

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

/** The customer's pages under `/dashboard` (the app nests this router there). */
export function CustomerArea() {
  return (
    <AppShell area="dashboard" nav={NAV}>
      <Suspense fallback={<Loading />}>
        <Switch>
          <Route path="/" component={Home} />
          <Route path="/sign-in">
            <SignInPage />
          </Route>
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
          <Route path="/jobs/new">
            <RequireSession>
              <NewJobPage />
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
