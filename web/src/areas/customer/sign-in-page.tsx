import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { useLocation, useSearch } from 'wouter';
import { ConnectorAlreadyConnectedError, useConfig, useConnection, useConnectors, type Connector } from 'wagmi';
import { connect, disconnect, getConnection, signMessage, switchChain } from 'wagmi/actions';
import { createSiweMessage } from 'viem/siwe';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { useServiceIndex } from '../../lib/index';
import { useSession, useSetSession } from '../../lib/session';
import { BROWSER_WALLET_ID } from '../../lib/wallet';
import { EmptyState } from '../../ui/states';
import { Page } from '../../ui/page';

const MESSAGE_TTL_MS = 10 * 60_000;

/**
 * Wallets to offer: every EIP-6963 wallet; the plain injected one only when none announced itself
 * and `window.ethereum` exists (an announcing wallet sets `window.ethereum` too: it would be listed twice).
 */
function offeredWallets(connectors: readonly Connector[]): Connector[] {
  const announced = connectors.filter((c) => c.id !== BROWSER_WALLET_ID);
  if (announced.length > 0) return announced;
  return connectors.filter((c) => c.id === BROWSER_WALLET_ID && typeof window !== 'undefined' && 'ethereum' in window && window.ethereum !== undefined);
}

/**
 * Sign-In with Ethereum: pick a wallet, switch it to the deployment's chain, sign the server's
 * nonce. Every area mounts it at its own `/sign-in`; `home` is where the area starts.
 */
export default function SignInPage({ home = '/jobs' }: { home?: string }) {
  const api = useApi();
  const config = useConfig();
  const connectors = offeredWallets(useConnectors());
  const connection = useConnection();
  const index = useServiceIndex();
  const session = useSession();
  const setSession = useSetSession();
  const [, navigate] = useLocation();
  const params = new URLSearchParams(useSearch());
  const next = params.get('next');
  const [step, setStep] = useState<string | null>(null);
  const chainId = index.data!.chainId;

  const connectWallet = useMutation({
    mutationFn: async (connector: Connector) => {
      // wagmi may have reconnected an authorized wallet on load already.
      const current = getConnection(config);
      if (current.connector?.uid === connector.uid && current.status !== 'disconnected') return;
      if (current.status !== 'disconnected') await disconnect(config);
      try {
        await connect(config, { connector });
      } catch (err) {
        if (!(err instanceof ConnectorAlreadyConnectedError)) throw err;
      }
    },
  });

  const signIn = useMutation({
    mutationFn: async () => {
      if (connection.status !== 'connected' || !connection.address) throw new Error('Choose a wallet first.');
      if (connection.chainId !== chainId) {
        setStep(`Switching your wallet to chain ${chainId}…`);
        await switchChain(config, { chainId });
      }
      setStep('Asking the server for a sign-in nonce…');
      const { nonce } = await api.auth.nonce();
      const issuedAt = new Date();
      const message = createSiweMessage({
        domain: location.host,
        uri: location.origin,
        address: connection.address,
        chainId,
        nonce,
        version: '1',
        statement: 'Sign in to the gpufarm dashboard.',
        issuedAt,
        expirationTime: new Date(issuedAt.getTime() + MESSAGE_TTL_MS),
      });
      setStep('Sign the message in your wallet…');
      const signature = await signMessage(config, { account: connection.address, message });
      setStep('Checking the signature…');
      return api.auth.signIn(message, signature);
    },
    onSuccess: (signed) => {
      setSession(signed);
      navigate(next && next.startsWith('/') && !next.startsWith('//') ? next : home, { replace: true });
    },
    onSettled: () => setStep(null),
  });

  return (
    <Page title="Sign in">
      {params.get('reason') === 'wallet-changed' ? (
        <p className="notice" role="status">
          Your wallet switched to another account or network, so you were signed out. Sign in again with the wallet you want to use.
        </p>
      ) : null}
      {session.data ? (
        <p className="notice">
          You are signed in as <code>{session.data.address}</code>. Signing in again replaces that session.
        </p>
      ) : null}
      <section aria-labelledby="wallets-heading" className="card">
        <h2 id="wallets-heading">1. Choose your wallet</h2>
        {connectors.length === 0 ? (
          <EmptyState title="No wallet found in this browser">
            <p>Install or enable a browser wallet extension (for example MetaMask or Rabby), then reload this page.</p>
          </EmptyState>
        ) : (
          <ul className="wallet-list">
            {connectors.map((connector) => {
              const active = connection.status === 'connected' && connection.connector?.uid === connector.uid;
              return (
                <li key={connector.uid}>
                  <button type="button" className={active ? 'wallet wallet-active' : 'wallet'} aria-pressed={active} onClick={() => connectWallet.mutate(connector)} disabled={connectWallet.isPending}>
                    {connector.icon ? <img src={connector.icon} alt="" className="wallet-icon" /> : null}
                    {connector.name}
                  </button>
                </li>
              );
            })}
          </ul>
        )}
        {connectWallet.isError ? (
          <p className="tx tx-failed" role="alert">
            Could not connect the wallet: {reasonOf(connectWallet.error)}
          </p>
        ) : null}
        {connection.status === 'connected' && connection.address ? (
          <p>
            Connected: <code>{connection.address}</code>
            {connection.chainId !== chainId ? ` (on chain ${connection.chainId}; you will be asked to switch to chain ${chainId})` : ''}
          </p>
        ) : null}
      </section>
      <section aria-labelledby="sign-heading" className="card">
        <h2 id="sign-heading">2. Sign the sign-in message</h2>
        <p className="muted">Signing costs nothing and sends no transaction. The message is valid for 10 minutes and can be used once.</p>
        <button type="button" className="primary" onClick={() => signIn.mutate()} disabled={connection.status !== 'connected' || signIn.isPending}>
          Sign in with Ethereum
        </button>
        {step ? (
          <p className="tx tx-wallet" role="status">
            <span className="spinner" aria-hidden="true" /> {step}
          </p>
        ) : null}
        {signIn.isError ? (
          <p className="tx tx-failed" role="alert">
            Sign-in failed: {reasonOf(signIn.error)}
          </p>
        ) : null}
      </section>
    </Page>
  );
}
