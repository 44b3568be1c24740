import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { anyAnswer, OPERATOR_API } from '../../lib/fleet-api';
import { useSession } from '../../lib/session';
import type { OperatorFarm } from '../../lib/session-api';
import { Hash } from '../../ui/hash';
import { Page } from '../../ui/page';
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
          {farm.role === 'payout' ? <OperatorForm farm={farm} /> : <p className="muted">Only the payout wallet adds or removes operators.</p>}
        </section>
      ))}
    </Page>
  );
}

function OperatorForm({ farm }: { farm: OperatorFarm }) {
  const api = useApi();
  const [wallet, setWallet] = useState('');
  const [done, setDone] = useState<string | null>(null);
  const change = useMutation({
    mutationFn: async (action: 'add' | 'remove') => {
      const path = `${OPERATOR_API}/farms/${encodeURIComponent(farm.id)}/operators`;
      const w = wallet.trim().toLowerCase();
      if (action === 'add') await api.request({ method: 'POST', path, body: { wallet: w }, schema: anyAnswer });
      else await api.request({ method: 'DELETE', path: `${path}/${encodeURIComponent(w)}`, schema: anyAnswer });
      return `${action === 'add' ? 'Added' : 'Removed'} ${w}.`;
    },
    onSuccess: (message) => {
      setDone(message);
      setWallet('');
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    change.mutate('add');
  };
  return (
    <form onSubmit={submit} className="filters" aria-label={`Operators of ${farm.slug}`}>
      <label className="field">
        <span>Operator wallet</span>
        <input value={wallet} onChange={(e) => setWallet(e.target.value)} placeholder="0x…" spellCheck={false} required />
      </label>
      <button type="submit" className="primary" disabled={change.isPending}>
        Add operator
      </button>
      <button type="button" className="danger" onClick={() => change.mutate('remove')} disabled={change.isPending || !wallet.trim()}>
        Remove operator
      </button>
      {done && change.isSuccess ? (
        <p className="tx tx-mined" role="status">
          {done}
        </p>
      ) : null}
      {change.isError ? (
        <p className="tx tx-failed" role="alert">
          {reasonOf(change.error)}
        </p>
      ) : null}
    </form>
  );
}
