import { accountListSchema, ADMIN_API, type AdminAccount } from '@gpufarm/shared';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { anyAnswer, useApi } from '../../lib/api';
import { when } from '../../lib/format';
import { ConfirmButton } from '../../ui/confirm';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Table } from '../../ui/table';
import { useUrlFilters } from '../../ui/url-filters';

/** Customer accounts found by wallet: suspend or reactivate one, revoke any of its API keys. */
export function AccountsPage() {
  const api = useApi();
  const { params, apply: search } = useUrlFilters('/accounts');
  const wallet = params.get('wallet') ?? '';
  const accounts = useQuery({
    queryKey: ['admin', 'accounts', wallet],
    queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/accounts`, query: { wallet }, schema: accountListSchema }),
  });
  return (
    <Page title="Accounts">
      <form className="filters" onSubmit={search} key={wallet} role="search" aria-label="Find accounts">
        <label className="field">
          <span>Wallet address</span>
          <input name="wallet" defaultValue={wallet} placeholder="0x…" spellCheck={false} />
        </label>
        <button type="submit" className="primary">
          Search
        </button>
      </form>
      <QueryState query={accounts} loading="Loading accounts…" errorTitle="Could not load the accounts" isEmpty={(a) => a.data.length === 0} empty={{ title: wallet ? `No account for ${wallet}` : 'No account yet' }}>
        {(a) => (
          <Table
            caption="Accounts"
            rows={a.data}
            rowKey={(account) => account.id}
            columns={[
              { header: 'Account', cell: (account) => <code>{account.id}</code> },
              { header: 'Wallet', cell: (account) => (account.walletAddress ? <code>{account.walletAddress}</code> : '—') },
              { header: 'Status', cell: (account) => <span className={`badge ${account.status === 'active' ? 'badge-ok' : 'badge-bad'}`}>{account.status}</span> },
              { header: 'Created', cell: (account) => when(account.createdAt) },
              { header: 'API keys', cell: (account) => <Keys account={account} /> },
              { header: 'Actions', cell: (account) => <AccountAction account={account} /> },
            ]}
          />
        )}
      </QueryState>
    </Page>
  );
}

function useRefresh() {
  const queryClient = useQueryClient();
  return () => void queryClient.invalidateQueries({ queryKey: ['admin', 'accounts'] });
}

function AccountAction({ account }: { account: AdminAccount }) {
  const api = useApi();
  const refresh = useRefresh();
  const [reason, setReason] = useState('');
  const path = `${ADMIN_API}/accounts/${encodeURIComponent(account.id)}`;
  if (account.status === 'suspended') {
    return (
      <ConfirmButton label="Reactivate" title="Reactivate this account?" run={() => api.request({ method: 'POST', path: `${path}/reactivate`, schema: anyAnswer })} onDone={refresh}>
        <p>Its keys that are not revoked work again.</p>
      </ConfirmButton>
    );
  }
  return (
    <ConfirmButton label="Suspend" title="Suspend this account?" danger run={() => api.request({ method: 'POST', path: `${path}/suspend`, body: { reason: reason || null }, schema: anyAnswer })} onDone={refresh}>
      <p>Its API keys and dashboard sessions are refused until it is reactivated.</p>
      <label className="field">
        <span>Reason (recorded in the audit log)</span>
        <input value={reason} onChange={(e) => setReason(e.target.value)} />
      </label>
    </ConfirmButton>
  );
}

function Keys({ account }: { account: AdminAccount }) {
  const api = useApi();
  const refresh = useRefresh();
  if (account.keys.length === 0) return <span className="muted">none</span>;
  return (
    <ul className="plain-list">
      {account.keys.map((key) => (
        <li key={key.id}>
          <code>{key.prefix}</code> {key.label ?? ''}{' '}
          {key.revokedAt ? (
            <span className="muted">revoked {when(key.revokedAt)}</span>
          ) : (
            <ConfirmButton label={`Revoke ${key.prefix}`} title={`Revoke the key ${key.prefix}?`} danger run={() => api.request({ method: 'POST', path: `${ADMIN_API}/keys/${encodeURIComponent(key.id)}/revoke`, schema: anyAnswer })} onDone={refresh}>
              <p>Calls with it are refused from now on with `revoked_api_key`. This cannot be undone.</p>
            </ConfirmButton>
          )}
        </li>
      ))}
    </ul>
  );
}
