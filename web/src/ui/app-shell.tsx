import { useEffect, type ReactNode } from 'react';
import { Link, useLocation } from 'wouter';
import { useConnection } from 'wagmi';
import { shortHex } from '../lib/format';
import { useSession, useSignOut } from '../lib/session';
import type { SessionView } from '../lib/session-api';
import { ErrorState, Loading } from './states';

export interface NavItem {
  href: string;
  label: string;
}

/** The frame of every area: the header with the area's navigation and the session menu, then the page. */
export function AppShell({ area, nav, children }: { area: string; nav: NavItem[]; children: ReactNode }) {
  const [location] = useLocation();
  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="header">
        <div className="header-row">
          <Link href="/" className="brand">
            gpufarm <span className="brand-area">{area}</span>
          </Link>
          <AreaLinks current={area} />
          <SessionMenu />
        </div>
        <nav aria-label="Main" className="nav">
          <ul>
            {nav.map((item) => (
              <li key={item.href}>
                <Link href={item.href} aria-current={location === item.href || location.startsWith(`${item.href}/`) ? 'page' : undefined}>
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
      </header>
      <WalletSessionGuard />
      <main id="main" className="main" tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}

/** The app's areas, each a path of its own; `~` leaves the current area's base. */
const AREAS = [
  { area: 'dashboard', href: '~/dashboard/', label: 'Dashboard' },
  { area: 'operator', href: '~/operator/', label: 'Operator' },
  { area: 'admin', href: '~/admin/', label: 'Admin' },
] as const;

/** Links to the other areas the signed-in wallet may open: operators see Operator, admins Admin. */
function AreaLinks({ current }: { current: string }) {
  const session = useSession();
  const roles = session.data?.roles;
  if (!roles || (!roles.admin && roles.operatorFarms.length === 0)) return null;
  const open = AREAS.filter((a) => a.area === 'dashboard' || (a.area === 'admin' ? roles.admin : roles.operatorFarms.length > 0));
  return (
    <nav aria-label="Areas" className="area-links">
      <ul>
        {open.map((a) => (
          <li key={a.area}>
            <Link href={a.href} aria-current={a.area === current ? 'true' : undefined}>
              {a.label}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}

/** The signed-in address and "Sign out", or a link to sign in. */
function SessionMenu() {
  const session = useSession();
  const signOut = useSignOut();
  const [, navigate] = useLocation();
  if (session.isPending) return null;
  if (!session.data) {
    return (
      <Link href="/sign-in" className="button-link">
        Sign in
      </Link>
    );
  }
  return (
    <div className="session-menu">
      <span className="session-address" title={session.data.address}>
        <span className="visually-hidden">Signed in as </span>
        {shortHex(session.data.address)}
      </span>
      <button type="button" onClick={() => signOut.mutate(undefined, { onSettled: () => navigate('/sign-in') })} disabled={signOut.isPending}>
        Sign out
      </button>
    </div>
  );
}

/**
 * A session belongs to one wallet account on one chain: when the connected wallet switches to
 * another account or chain, the session is signed out and the sign-in page says why.
 */
function WalletSessionGuard() {
  const session = useSession();
  const connection = useConnection();
  const signOut = useSignOut();
  const [, navigate] = useLocation();
  const signed = session.data;
  const mismatch =
    signed != null && connection.status === 'connected' && (connection.address?.toLowerCase() !== signed.address || connection.chainId !== signed.chainId);
  useEffect(() => {
    if (!mismatch || signOut.isPending) return;
    signOut.mutate(undefined, { onSettled: () => navigate('/sign-in?reason=wallet-changed') });
  }, [mismatch, signOut, navigate]);
  return null;
}

/**
 * Renders `children` for a signed-in wallet that holds the area's role (`allowed`); a wallet
 * without it is told whose area this is and where to go instead.
 */
export function RequireRole({ area, allowed, children }: { area: string; allowed: (session: SessionView) => boolean; children: ReactNode }) {
  const session = useSession();
  return (
    <RequireSession>
      {session.data && !allowed(session.data) ? (
        <div className="error-state" role="alert">
          <p className="error-title">You cannot open the {area} area</p>
          <p>
            You are signed in as <code>{session.data.address}</code>, which {area === 'admin' ? 'is not an admin wallet of this deployment' : 'is not the payout wallet or a listed operator of any farm'}.
          </p>
          <p>
            Sign out and sign in with {area === 'admin' ? 'an admin wallet' : 'a farm’s payout or operator wallet'}, or go to <Link href="~/dashboard/">your dashboard</Link>.
          </p>
        </div>
      ) : (
        children
      )}
    </RequireSession>
  );
}

/** Renders `children` for a signed-in session; otherwise sends the reader to sign in and back. */
export function RequireSession({ children }: { children: ReactNode }) {
  const session = useSession();
  const [location, navigate] = useLocation();
  const missing = session.isSuccess && session.data === null;
  useEffect(() => {
    if (missing) navigate(`/sign-in?next=${encodeURIComponent(location)}`, { replace: true });
  }, [missing, location, navigate]);
  if (session.isError) return <ErrorState error={session.error} title="Could not check your session" retry={() => void session.refetch()} />;
  if (!session.data) return <Loading label="Checking your session…" />;
  return <>{children}</>;
}
