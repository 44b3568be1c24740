import { type EnrollmentTokenCreated, enrollmentTokenCreatedSchema, enrollmentTokenListSchema, type EnrollmentTokenRecord, OPERATOR_API } from '@gpufarm/shared';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { anyAnswer, useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { usd, when } from '../../lib/format';
import { ConfirmButton } from '../../ui/confirm';
import { CopyButton } from '../../ui/copy-button';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';
import { FarmFilter, FarmSelect, useFarmParam, useOperatorFarms } from './farm-filter';

/** Enrollment tokens: make one (region and price), run its `gf-agent enroll` line on the machine, revoke unused ones. */
export function TokensPage() {
  const [farm] = useFarmParam();
  const [created, setCreated] = useState<EnrollmentTokenCreated | null>(null);
  return (
    <Page title="Enrollment tokens">
      <CreateTokenForm onCreated={setCreated} />
      {created ? (
        <section className="card" role="region" aria-label="New enrollment token">
          <h2>Enroll the machine</h2>
          <p className="warning">Run this on the machine now: the token is shown only this once and enrolls one machine.</p>
          <pre className="command">
            <code>{created.command}</code>
          </pre>
          <CopyButton text={created.command} label="Copy command" />
          <button type="button" className="button-small" onClick={() => setCreated(null)}>
            Done
          </button>
        </section>
      ) : null}
      <section aria-labelledby="tokens-heading">
        <h2 id="tokens-heading">Tokens</h2>
        <div className="filters">
          <FarmFilter />
        </div>
        <TokenList key={farm} farm={farm} />
      </section>
    </Page>
  );
}

function TokenList({ farm }: { farm: string }) {
  const api = useApi();
  const pages = useCursorPages();
  const { cursor } = pages;
  const tokens = useQuery({
    queryKey: ['operator', 'tokens', farm, cursor],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/enrollment-tokens`, query: { farm, cursor }, schema: enrollmentTokenListSchema }),
  });
  return (
    <QueryState query={tokens} loading="Loading tokens…" errorTitle="Could not load the enrollment tokens" isEmpty={(t) => t.data.length === 0} empty={{ title: 'No enrollment token yet', body: <p>Create one above for each machine you add.</p> }}>
      {(t) => (
        <>
          <Table
            caption="Enrollment tokens"
            rows={t.data}
            rowKey={(token) => token.id}
            columns={[
              { header: 'Label', cell: (token) => token.label ?? <span className="muted">none</span> },
              { header: 'Farm · region', cell: (token) => `${token.farmSlug} · ${token.regionKey}` },
              { header: 'Price / GPU-h', cell: (token) => (token.pricePerGpuHourMicroUsd == null ? 'not set' : usd(token.pricePerGpuHourMicroUsd)), className: 'num' },
              { header: 'Created', cell: (token) => when(token.createdAt) },
              { header: 'Status', cell: tokenStatus },
              { header: 'Actions', cell: (token) => (token.usedAt || token.revokedAt ? null : <RevokeToken token={token} />) },
            ]}
          />
          <Pager pages={pages} nextCursor={t.nextCursor ?? null} busy={tokens.isFetching} />
        </>
      )}
    </QueryState>
  );
}

function tokenStatus(token: EnrollmentTokenRecord): string {
  if (token.revokedAt) return `revoked ${when(token.revokedAt)}`;
  if (token.usedAt) return `used ${when(token.usedAt)}${token.machineId ? ` by ${token.machineId}` : ''}`;
  if (token.expiresAt && Date.parse(token.expiresAt) < Date.now()) return `expired ${when(token.expiresAt)}`;
  return token.expiresAt ? `unused, expires ${when(token.expiresAt)}` : 'unused';
}

function CreateTokenForm({ onCreated }: { onCreated: (created: EnrollmentTokenCreated) => void }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const farms = useOperatorFarms();
  const [farm, setFarm] = useState(farms[0]?.slug ?? '');
  const [region, setRegion] = useState('');
  const [price, setPrice] = useState('');
  const [label, setLabel] = useState('');
  const create = useMutation({
    mutationFn: () =>
      api.request({
        method: 'POST',
        path: `${OPERATOR_API}/enrollment-tokens`,
        status: 201,
        body: { farm, regionKey: region.trim(), pricePerGpuHour: price.trim() || null, ...(label.trim() ? { label: label.trim() } : {}) },
        schema: enrollmentTokenCreatedSchema,
      }),
    onSuccess: (created) => {
      onCreated(created);
      setLabel('');
      void queryClient.invalidateQueries({ queryKey: ['operator', 'tokens'] });
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };
  return (
    <form className="card" onSubmit={submit} aria-labelledby="create-token-heading">
      <h2 id="create-token-heading">New enrollment token</h2>
      <div className="filters">
        <FarmSelect value={farm} onChange={setFarm} allowAll={false} />
        <label className="field">
          <span>Region</span>
          <input value={region} onChange={(e) => setRegion(e.target.value)} placeholder="eu-west" required />
        </label>
        <label className="field">
          <span>Price per GPU-hour (USD)</span>
          <input value={price} onChange={(e) => setPrice(e.target.value)} inputMode="decimal" placeholder="0.50" />
        </label>
        <label className="field">
          <span>Label</span>
          <input value={label} onChange={(e) => setLabel(e.target.value)} placeholder="rack 3, box 7" />
        </label>
        <button type="submit" className="primary" disabled={create.isPending}>
          Create token
        </button>
      </div>
      {create.isError ? (
        <p className="tx tx-failed" role="alert">
          Could not create the token: {reasonOf(create.error)}
        </p>
      ) : null}
    </form>
  );
}

function RevokeToken({ token }: { token: EnrollmentTokenRecord }) {
  const api = useApi();
  const queryClient = useQueryClient();
  return (
    <ConfirmButton
      label="Revoke"
      title="Revoke this enrollment token?"
      danger
      run={() => api.request({ method: 'POST', path: `${OPERATOR_API}/enrollment-tokens/${encodeURIComponent(token.id)}/revoke`, schema: anyAnswer })}
      onDone={() => void queryClient.invalidateQueries({ queryKey: ['operator', 'tokens'] })}
    >
      <p>No machine can enroll with it any more.</p>
    </ConfirmButton>
  );
}
