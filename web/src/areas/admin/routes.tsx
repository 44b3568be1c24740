import { lazy, type ReactNode } from 'react';
import { Redirect, Route, Switch } from 'wouter';
import { useSession } from '../../lib/session';
import { AppShell, RequireRole, type NavItem } from '../../ui/app-shell';
import { EmptyState, Loading } from '../../ui/states';
import { AccountsPage } from './accounts-page';
import { AuditPage } from './audit-page';
import { DisputesPage } from './disputes-page';
import { EventsPage } from './events-page';
import { FarmsPage } from './farms-page';
import { AdminJobPage } from './job-page';
import { MachinePage } from './machine-page';
import { MachinesPage } from './machines-page';
import { OverviewPage } from './overview-page';

const SignInPage = lazy(() => import('../customer/sign-in-page'));

const NAV: NavItem[] = [
  { href: '/overview', label: 'Overview' },
  { href: '/machines', label: 'Machines' },
  { href: '/events', label: 'Events' },
  { href: '/farms', label: 'Farms' },
  { href: '/disputes', label: 'Disputes' },
  { href: '/accounts', label: 'Accounts' },
  { href: '/audit', label: 'Audit log' },
];

function Home() {
  const session = useSession();
  if (session.isPending) return <Loading />;
  return <Redirect to={session.data ? '/overview' : '/sign-in'} replace />;
}

/** Every admin page needs a wallet of `GF_ADMIN_WALLETS`; the API checks it again at each call. */
function Admin({ children }: { children: ReactNode }) {
  return (
    <RequireRole area="admin" allowed={(s) => s.roles.admin}>
      {children}
    </RequireRole>
  );
}

/** The admin area under `/admin`: the fleet's health and the actions on it. */
export default function AdminArea() {
  return (
    <AppShell area="admin" nav={NAV}>
      <Switch>
        <Route path="/" component={Home} />
        <Route path="/sign-in">
          <SignInPage home="/overview" />
        </Route>
        <Route path="/overview">
          <Admin>
            <OverviewPage />
          </Admin>
        </Route>
        <Route path="/machines">
          <Admin>
            <MachinesPage />
          </Admin>
        </Route>
        <Route path="/machines/:id">
          {(params) => (
            <Admin>
              <MachinePage id={params.id} />
            </Admin>
          )}
        </Route>
        <Route path="/jobs/:id">
          {(params) => (
            <Admin>
              <AdminJobPage id={params.id} />
            </Admin>
          )}
        </Route>
        <Route path="/events">
          <Admin>
            <EventsPage />
          </Admin>
        </Route>
        <Route path="/farms">
          <Admin>
            <FarmsPage />
          </Admin>
        </Route>
        <Route path="/disputes">
          <Admin>
            <DisputesPage />
          </Admin>
        </Route>
        <Route path="/accounts">
          <Admin>
            <AccountsPage />
          </Admin>
        </Route>
        <Route path="/audit">
          <Admin>
            <AuditPage />
          </Admin>
        </Route>
        <Route>
          <EmptyState title="No such page">
            <p>Use the navigation above, or go to the fleet overview.</p>
          </EmptyState>
        </Route>
      </Switch>
    </AppShell>
  );
}
