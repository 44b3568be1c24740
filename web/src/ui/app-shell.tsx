import { useEffect, type ReactNode } from 'react';
import { Link, useLocation } from 'wouter';
import { useConnection } from 'wagmi';
import { shortHex } from '../lib/format';
import { useSession, useSignOut } from '../lib/session';
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
