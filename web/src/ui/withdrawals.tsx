import type { Withdrawal } from '@gpufarm/shared';
import { useState } from 'react';
import { tokenAmount } from '../lib/format';
import { isBusy, useEscrowCall } from './escrow-call';
import { Hash } from './hash';
import { Table } from './table';
import { TxStatus, type TxState } from './tx-status';

const keyOf = (w: Withdrawal) => `${w.wallet}/${w.token}`;

/**
 * Payouts the escrow holds because it could not send them at a release, per wallet and token,
 * each with the Withdraw its own wallet sends (`withdraw(token)`: the escrow pays only the
 * caller). A row of another wallet says which wallet to sign in with. The withdrawals sent from
 * here stay listed with their outcome after their row is gone.
 */
export function WithdrawalsTable({ rows, caption, signedInAs, onMined }: { rows: readonly Withdrawal[]; caption: string; signedInAs: string | null; onMined: () => void }) {
  const send = useEscrowCall();
  const [sent, setSent] = useState<Record<string, TxState>>({});
  const withdraw = async (w: Withdrawal) => {
    const label = `Withdraw ${tokenAmount(w.amount, w.decimals, w.symbol)}`;
    if (await send(label, { functionName: 'withdraw', token: w.token as `0x${string}` }, (state) => setSent((s) => ({ ...s, [keyOf(w)]: state })))) onMined();
  };
  const states = Object.entries(sent);
  return (
    <>
      {rows.length === 0 ? null : (
        <Table
          caption={caption}
          rows={[...rows]}
          rowKey={keyOf}
          columns={[
            { header: 'Wallet', cell: (w) => <Hash value={w.wallet} label="wallet" /> },
            { header: 'Waiting for withdrawal', cell: (w) => tokenAmount(w.amount, w.decimals, w.symbol), className: 'num' },
            { header: 'Jobs', cell: (w) => w.jobs.map((j) => j.jobId).join(', ') },
            {
              header: 'Withdraw',
              cell: (w) =>
                signedInAs?.toLowerCase() === w.wallet.toLowerCase() ? (
                  <button type="button" className="primary" onClick={() => void withdraw(w)} disabled={isBusy(sent[keyOf(w)] ?? { phase: 'idle' })}>
                    Withdraw
                  </button>
                ) : (
                  <span className="muted">Sign in with this wallet to withdraw</span>
                ),
            },
          ]}
        />
      )}
      {states.length ? (
        <ul className="tx-steps" aria-label="Withdrawals sent from this page">
          {states.map(([key, state]) => (
            <li key={key}>
              <TxStatus state={state} />
            </li>
          ))}
        </ul>
      ) : null}
    </>
  );
}
