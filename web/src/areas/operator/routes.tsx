import { lazy, type ReactNode } from 'react';
import { Redirect, Route, Switch } from 'wouter';
import { useSession } from '../../lib/session';
import { AppShell, RequireRole, type NavItem } from '../../ui/app-shell';
import { EmptyState, Loading } from '../../ui/states';
import { EarningsPage } from './earnings-page';
import { MachinePage } from './machine-page';
import { OperatorJobPage } from './job-page';
import { MachinesPage } from './machines-page';
import { MarketPage } from './market-page';
import { OperatorsPage } from './operators-page';
import { PricesPage } from './prices-page';
import { TokensPage } from './tokens-page';

const SignInPage = lazy(() => import('../customer/sign-in-page'));

const NAV: NavItem[] = [
  { href: '/machines', label: 'Machines' },
  { href: '/market', label: 'Market' },
  { href: '/prices', label: 'Prices' },
  { href: '/enrollment', label: 'Enrollment tokens' },
  { href: '/earnings', label: 'Earnings' },
  { href: '/operators', label: 'Operators' },
];

function Home() {
  const session = useSession();
  if (session.isPending) return <Loading />;
  return <Redirect to={session.data ? '/machines' : '/sign-in'} replace />;
}

/** Every operator page needs a farm's payout or listed operator wallet; the API checks it again at each call. */
function Operator({ children }: { children: ReactNode }) {
  return (
    <RequireRole area="operator" allowed={(s) => s.roles.operatorFarms.length > 0}>
      {children}
    </RequireRole>
  );
}

/** The farm operator's area under `/operator`: why each machine earns or not, and what it earned. */
export default function OperatorArea() {
  return (
    <AppShell area="operator" nav={NAV}>
      <Switch>
        <Route path="/" component={Home} />
        <Route path="/sign-in">
          <SignInPage home="/machines" />
        </Route>
        <Route path="/machines">
          <Operator>
            <MachinesPage />
          </Operator>
        </Route>
        <Route path="/machines/:id">
          {(params) => (
            <Operator>
              <MachinePage id={params.id} />
            </Operator>
          )}
        </Route>
        <Route path="/jobs/:id">
          {(params) => (
            <Operator>
              <OperatorJobPage id={params.id} />
            </Operator>
          )}
        </Route>
        <Route path="/market">
          <Operator>
            <MarketPage />
          </Operator>
        </Route>
        <Route path="/prices">
          <Operator>
            <PricesPage />
          </Operator>
        </Route>
        <Route path="/enrollment">
          <Operator>
            <TokensPage />
          </Operator>
        </Route>
        <Route path="/earnings">
          <Operator>
            <EarningsPage />
          </Operator>
        </Route>
        <Route path="/operators">
          <Operator>
            <OperatorsPage />
          </Operator>
        </Route>
        <Route>
          <EmptyState title="No such page">
            <p>Use the navigation above, or go to your machines.</p>
          </EmptyState>
        </Route>
      </Switch>
    </AppShell>
  );
}
