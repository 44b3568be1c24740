import { Hash } from './hash';

/** Where a wallet action is: waiting for the wallet, sent (pending), mined (a step without a transaction: done), or failed with the reason. */
export type TxState =
  | { phase: 'idle' }
  | { phase: 'wallet'; step: string }
  /** The server sends it (an admin action through the escrow's operator account): no wallet to confirm in. */
  | { phase: 'sending'; step: string }
  | { phase: 'pending'; step: string; hash: string }
  | { phase: 'mined'; step: string; hash: string | null }
  | { phase: 'failed'; step: string; reason: string; hash?: string | null };

/** The state of one wallet action, announced as it changes; a failure is an alert with its reason. */
export function TxStatus({ state }: { state: TxState }) {
  if (state.phase === 'idle') return null;
  if (state.phase === 'failed') {
    return (
      <div className="tx tx-failed" role="alert">
        <strong>Failed:</strong> {state.step}. {state.reason}
        {state.hash ? (
          <div>
            Transaction <Hash value={state.hash} label="transaction hash" />
          </div>
        ) : null}
      </div>
    );
  }
  return (
    <div className={`tx tx-${state.phase === 'sending' ? 'wallet' : state.phase}`} role="status">
      {state.phase === 'sending' ? (
        <>
          <span className="spinner" aria-hidden="true" /> {state.step}: transaction pending, waiting for it to be mined…
        </>
      ) : state.phase === 'wallet' ? (
        <>
          <span className="spinner" aria-hidden="true" /> {state.step}: confirm in your wallet…
        </>
      ) : state.phase === 'pending' ? (
        <>
          <span className="spinner" aria-hidden="true" /> {state.step}: pending, transaction <Hash value={state.hash} label="transaction hash" />
        </>
      ) : (
        <>
          <strong>{state.hash ? 'Mined:' : 'Done:'}</strong> {state.step}
          {state.hash ? (
            <>
              {' '}
              (transaction <Hash value={state.hash} label="transaction hash" />)
            </>
          ) : null}
        </>
      )}
    </div>
  );
}
