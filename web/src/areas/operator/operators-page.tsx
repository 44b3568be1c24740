import { farmOperatorListSchema, OPERATOR_API } from '@gpufarm/shared';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { anyAnswer, useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { when } from '../../lib/format';
import { useSession } from '../../lib/session';
import type { OperatorFarm } from '../../lib/session-api';
import { ConfirmButton } from '../../ui/confirm';
import { Hash } from '../../ui/hash';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Table } from '../../ui/table';
import { useOperatorFarms } from './farm-filter';

/** Who runs each farm: its payout wallet may list other wallets as operators (they see and run the machines, they are not paid). */
export function OperatorsPage() {
  const farms = useOperatorFarms();
  const address = useSession().data?.address;
  return (
    <Page title="Operators">
      {farms.map((farm) => (
        <section key={farm.id} className="card" aria-labelledby={`farm-${farm.id}`}>
          <h2 id={`farm-${farm.id}`}>
            {farm.name} ({farm.slug})
          </h2>
          <p>
            Payout wallet: {farm.payoutAddress ? <Hash value={farm.payoutAddress} label="payout wallet" /> : 'none'}. You (<code>{address}</code>) are its {farm.role === 'payout' ? 'payout wallet' : 'operator'}.
          </p>
          <Operators farm={farm} />
        </section>
      ))}
    </Page>
  );
}

function Operators({ farm }: { farm: OperatorFarm }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const path = `${OPERATOR_API}/farms/${encodeURIComponent(farm.id)}/operators`;
  const operators = useQuery({ queryKey: ['operator', 'operators', farm.id], queryFn: () => api.request({ method: 'GET', path, schema: farmOperatorListSchema }) });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['operator', 'operators', farm.id] });
  const payout = farm.role === 'payout';
  return (
    <>
      <QueryState query={operators} loading="Loading operators…" errorTitle="Could not load the operators" isEmpty={(o) => o.data.length === 0} empty={{ title: 'No operator wallet listed', body: <p>Only the payout wallet runs this farm.</p> }}>
        {(o) => (
          <Table
            caption={`Operators of ${farm.slug}`}
            rows={o.data}
            rowKey={(op) => op.wallet}
            columns={[
              { header: 'Wallet', cell: (op) => <code>{op.wallet}</code> },
              { header: 'Added', cell: (op) => when(op.addedAt) },
              ...(payout
                ? [
                    {
                      header: 'Actions',
                      cell: (op: { wallet: string }) => (
                        <ConfirmButton label="Remove" title={`Remove ${op.wallet} from ${farm.slug}?`} danger run={() => api.request({ method: 'DELETE', path: `${path}/${op.wallet}`, schema: anyAnswer })} onDone={refresh}>
                          <p>The wallet no longer sees or runs this farm’s machines.</p>
                        </ConfirmButton>
                      ),
                    },
                  ]
                : []),
            ]}
          />
        )}
      </QueryState>
      {payout ? <AddOperator path={path} onAdded={refresh} /> : <p className="muted">Only the payout wallet adds or removes operators.</p>}
    </>
  );
}

function AddOperator({ path, onAdded }: { path: string; onAdded: () => void }) {
  const api = useApi();
  const [wallet, setWallet] = useState('');
  const add = useMutation({
    mutationFn: () => api.request({ method: 'POST', path, body: { wallet: wallet.trim() }, schema: anyAnswer }),
    onSuccess: () => {
      setWallet('');
      onAdded();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    add.mutate();
  };
  return (
    <form onSubmit={submit} className="filters" aria-label="Add an operator">
      <label className="field">
        <span>Operator wallet</span>
        <input value={wallet} onChange={(e) => setWallet(e.target.value)} placeholder="0x…" spellCheck={false} required />
      </label>
      <button type="submit" className="primary" disabled={add.isPending}>
        Add operator
      </button>
      {add.isError ? (
        <p className="tx tx-failed" role="alert">
          Could not add the operator: {reasonOf(add.error)}
        </p>
      ) : null}
    </form>
  );
}
