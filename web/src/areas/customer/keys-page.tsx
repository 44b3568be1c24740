import { API_KEY_SCOPES } from '@gpufarm/shared';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { when } from '../../lib/format';
import type { ApiKeyCreated, ApiKeyScope, ApiKeyView } from '../../lib/session-api';
import { CopyButton } from '../../ui/copy-button';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';

const KEYS = ['keys'] as const;

/** API keys: create one with a label and scopes (shown once), list them a page at a time, revoke one. */
export function KeysPage() {
  const api = useApi();
  const pages = useCursorPages();
  const { cursor } = pages;
  const keys = useQuery({ queryKey: [...KEYS, cursor], queryFn: () => api.keys.list(cursor), placeholderData: keepPreviousData });
  const [created, setCreated] = useState<ApiKeyCreated | null>(null);
  return (
    <Page title="API keys">
      <CreateKeyForm
        onCreated={(answer) => {
          setCreated(answer);
          // The new key is the newest: it is on the first page.
          pages.reset();
        }}
      />
      {created ? (
        <section className="card new-key" role="region" aria-label="New API key">
          <h2>New API key</h2>
          <p className="warning">This is the only time the key is shown. Copy it now and keep it secret: the dashboard cannot show it again.</p>
          <p>
            <code className="secret">{created.key}</code>
          </p>
          <CopyButton text={created.key} label="Copy key" />
          <button type="button" className="button-small" onClick={() => setCreated(null)}>
            I saved the key
          </button>
        </section>
      ) : null}
      <section aria-labelledby="keys-heading">
        <h2 id="keys-heading">Your keys</h2>
        <QueryState
          query={keys}
          loading="Loading your keys…"
          errorTitle="Could not load your keys"
          isEmpty={(k) => k.data.length === 0}
          empty={{ title: 'No API keys yet', body: <p>Create one above to use the API, the SDK or the gf command line.</p> }}
        >
          {(k) => (
            <>
              <Table
                caption="API keys"
                rows={k.data}
                rowKey={(key) => key.id}
                columns={[
                  { header: 'Prefix', cell: (key) => <code>{key.prefix}</code> },
                  { header: 'Label', cell: (key) => key.label ?? <span className="muted">none</span> },
                  { header: 'Scopes', cell: (key) => key.scopes.join(', ') },
                  { header: 'Created', cell: (key) => when(key.createdAt) },
                  { header: 'Last used', cell: (key) => (key.lastUsedAt ? when(key.lastUsedAt) : 'never') },
                  { header: 'Status', cell: (key) => (key.revokedAt ? `revoked ${when(key.revokedAt)}` : 'active') },
                  { header: 'Actions', cell: (key) => (key.revokedAt ? null : <RevokeButton apiKey={key} />) },
                ]}
              />
              <Pager pages={pages} nextCursor={k.nextCursor} busy={keys.isFetching} />
            </>
          )}
        </QueryState>
      </section>
    </Page>
  );
}

function CreateKeyForm({ onCreated }: { onCreated: (created: ApiKeyCreated) => void }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [label, setLabel] = useState('');
  const [scopes, setScopes] = useState<ApiKeyScope[]>(['jobs:create', 'jobs:read', 'artifacts:read']);
  const create = useMutation({
    mutationFn: () => api.keys.create({ ...(label.trim() ? { label: label.trim() } : {}), scopes }),
    onSuccess: (answer) => {
      onCreated(answer);
      setLabel('');
      void queryClient.invalidateQueries({ queryKey: KEYS });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };
  const toggle = (scope: ApiKeyScope, on: boolean) => setScopes((current) => (on ? [...current, scope] : current.filter((s) => s !== scope)));
  return (
    <form className="card form" onSubmit={submit} aria-labelledby="create-key-heading">
      <h2 id="create-key-heading">Create a key</h2>
      <label className="field">
        <span>Label</span>
        <input name="label" maxLength={64} value={label} onChange={(e) => setLabel(e.target.value)} placeholder="e.g. CI runner" />
      </label>
      <fieldset className="field">
        <legend>Scopes</legend>
        {API_KEY_SCOPES.map((scope) => (
          <label key={scope} className="check">
            <input type="checkbox" checked={scopes.includes(scope)} onChange={(e) => toggle(scope, e.target.checked)} />
            {scope}
          </label>
        ))}
      </fieldset>
      {scopes.length === 0 ? <p className="muted">Choose at least one scope.</p> : null}
      <button type="submit" className="primary" disabled={create.isPending || scopes.length === 0}>
        Create key
      </button>
      {create.isError ? (
        <p className="tx tx-failed" role="alert">
          The key was not created: {reasonOf(create.error)}
        </p>
      ) : null}
    </form>
  );
}

/** Revoke with a confirm step: the first press asks, "Confirm revoke" does it. */
function RevokeButton({ apiKey }: { apiKey: ApiKeyView }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [confirming, setConfirming] = useState(false);
  const revoke = useMutation({
    mutationFn: () => api.keys.revoke(apiKey.id),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: KEYS }),
  });
  if (!confirming) {
    return (
      <button type="button" className="button-small danger" onClick={() => setConfirming(true)}>
        Revoke
      </button>
    );
  }
  return (
    <span className="confirm">
      <button type="button" className="button-small danger" onClick={() => revoke.mutate()} disabled={revoke.isPending}>
        Confirm revoke
      </button>
      <button type="button" className="button-small" onClick={() => setConfirming(false)} disabled={revoke.isPending}>
        Cancel
      </button>
      {revoke.isError ? <span role="alert">{reasonOf(revoke.error)}</span> : null}
    </span>
  );
}
