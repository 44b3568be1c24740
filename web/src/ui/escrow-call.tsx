import { gpuFarmEscrowAbi } from '@gpufarm/shared';
import { useState, type ReactNode } from 'react';
import type { Address, Hash as TxHash, Hex } from 'viem';
import { useConfig } from 'wagmi';
import { getConnection, switchChain, waitForTransactionReceipt, writeContract } from 'wagmi/actions';
import { reasonOf } from '../lib/errors';
import { ConfirmButton } from './confirm';
import { useServiceIndex } from '../lib/index';
import { TxStatus, type TxState } from './tx-status';

/** An escrow function a person's own wallet sends: a job's (by its escrow key) or a withdrawal of a token's credit. */
export type EscrowCall =
  | { functionName: 'approve' | 'dispute' | 'claimRefund' | 'claimDisputeTimeout'; jobKey: Hex }
  | { functionName: 'withdraw'; token: Address };

/**
 * A wallet on the deployment's chain: connected (else a clear error) and switched if needed, and
 * the escrow the deployment names in its service index (null: it has none).
 */
export function useChainWallet() {
  const config = useConfig();
  const index = useServiceIndex().data!;
  const chainId = index.chainId;
  return {
    chainId,
    config,
    escrow: (index.escrow?.address ?? null) as Address | null,
    ready: async () => {
      const connection = getConnection(config);
      if (connection.status !== 'connected') throw new Error('No wallet is connected: sign in again with your wallet.');
      if (connection.chainId !== chainId) await switchChain(config, { chainId });
    },
  };
}

/**
 * Sends one escrow call from the connected wallet and reports each step to `show`: the wallet's
 * confirmation, the pending transaction, then mined or failed with the reason. Resolves to
 * whether it was mined successfully.
 */
export function useEscrowCall() {
  const wallet = useChainWallet();
  return async (label: string, call: EscrowCall, show: (state: TxState) => void): Promise<boolean> => {
    let hash: TxHash | null = null;
    try {
      show({ phase: 'wallet', step: label });
      await wallet.ready();
      const address = wallet.escrow;
      if (!address) throw new Error('This deployment has no escrow contract: gpufarm cannot take escrow actions here.');
      const target = { address, abi: gpuFarmEscrowAbi, chainId: wallet.chainId } as const;
      hash =
        call.functionName === 'withdraw'
          ? await writeContract(wallet.config, { ...target, functionName: 'withdraw', args: [call.token] })
          : await writeContract(wallet.config, { ...target, functionName: call.functionName, args: [call.jobKey] });
      show({ phase: 'pending', step: label, hash });
      const receipt = await waitForTransactionReceipt(wallet.config, { hash, chainId: wallet.chainId });
      if (receipt.status !== 'success') {
        show({ phase: 'failed', step: label, reason: 'The transaction reverted on chain.', hash });
        return false;
      }
      show({ phase: 'mined', step: label, hash });
      return true;
    } catch (err) {
      show({ phase: 'failed', step: label, reason: reasonOf(err), hash });
      return false;
    }
  };
}

/** True while a call is waiting for the wallet or for its transaction to be mined. */
export const isBusy = (state: TxState) => state.phase === 'wallet' || state.phase === 'pending';

/** A dialog before the wallet is asked: what the call moves, and the button that sends it. */
export interface EscrowConfirm {
  title: string;
  confirmLabel: string;
  body: ReactNode;
  /** Runs before the wallet is asked (e.g. storing the dispute's reason); its error stays in the dialog and nothing is sent. */
  prepare?: () => Promise<unknown>;
}

/**
 * One escrow call from the connected wallet, with its state. The button shows while `available`;
 * the state of a call made here stays after the data moved on, so its outcome can still be read.
 * With `confirm`, the button opens that dialog first and its confirm button sends the call.
 */
export function EscrowCallButton({ label, call, available, danger = false, confirm, onMined }: { label: string; call: EscrowCall; available: boolean; danger?: boolean; confirm?: EscrowConfirm; onMined: () => void }) {
  const send = useEscrowCall();
  const [state, setState] = useState<TxState>({ phase: 'idle' });
  const run = async () => {
    if (await send(label, call, setState)) onMined();
  };
  if (!available && state.phase === 'idle') return null;
  return (
    <div className="action">
      {available && confirm ? (
        // The dialog closes once confirmed; the wallet's steps then show beside the button.
        <ConfirmButton label={label} title={confirm.title} confirmLabel={confirm.confirmLabel} dismissLabel="Not now" danger={danger} small={false} disabled={isBusy(state)} run={async () => {
            await confirm.prepare?.();
            void run();
          }}
        >
          {confirm.body}
        </ConfirmButton>
      ) : available ? (
        <button type="button" className={danger ? 'danger' : 'primary'} onClick={() => void run()} disabled={isBusy(state)}>
          {label}
        </button>
      ) : null}
      <TxStatus state={state} />
    </div>
  );
}
