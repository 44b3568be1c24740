import type { FundStep } from '@gpufarm/client/browser';
import { gpuFarmEscrowAbi, type Job } from '@gpufarm/shared';
import { useState } from 'react';
import type { Address, Hash as TxHash, Hex } from 'viem';
import { useConfig } from 'wagmi';
import { getConnection, getWalletClient, switchChain, waitForTransactionReceipt, writeContract } from 'wagmi/actions';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { useServiceIndex } from '../../lib/index';
import { TxStatus, type TxState } from '../../ui/tx-status';

type EscrowAction = 'approve' | 'dispute' | 'claimRefund';

const ACTION_LABEL: Record<EscrowAction, string> = { approve: 'Approve early', dispute: 'Dispute', claimRefund: 'Claim refund' };

/**
 * A wallet on the deployment's chain: connected (else a clear error) and switched if needed, and
 * the escrow the deployment names in its service index (null: it has none).
 */
function useChainWallet() {
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

/** "Fund job" for a CREATED job: the SDK's fundJob with the connected wallet, each step shown. */
export function FundJob({ job, onStart, onDone }: { job: Job; onStart: () => void; onDone: () => void }) {
  const { gf } = useApi();
  const wallet = useChainWallet();
  const [steps, setSteps] = useState<TxState[]>([]);
  const [busy, setBusy] = useState(false);
  const show = (state: TxState) =>
    setSteps((current) => {
      const last = current[current.length - 1];
      return last && last.phase !== 'mined' && last.phase !== 'failed' && 'step' in last && last.step === (state as { step: string }).step ? [...current.slice(0, -1), state] : [...current, state];
    });
  const onStep = (step: FundStep) => {
    if (step.kind === 'skipped') show({ phase: 'mined', step: `${step.call.title} (allowance already covers it)`, hash: null });
    else if (step.kind === 'sent') show({ phase: 'pending', step: step.call.title, hash: step.hash });
    else if (step.kind === 'mined') show({ phase: 'mined', step: step.call.title, hash: step.hash });
    else if (step.kind === 'pending') show({ phase: 'wallet', step: `Waiting for ${step.answer.requiredConfirmations} confirmations (${step.answer.confirmations} so far)` });
    else if (step.kind === 'confirmed') show({ phase: 'mined', step: 'Funding confirmed by gpufarm: the job is queued', hash: null });
  };
  const fund = async () => {
    onStart();
    setBusy(true);
    setSteps([{ phase: 'wallet', step: 'Preparing the funding' }]);
    try {
      await wallet.ready();
      const client = await getWalletClient(wallet.config, { chainId: wallet.chainId });
      setSteps([]);
      await gf.fundJob(job.id, client, { onStep });
      onDone();
    } catch (err) {
      setSteps((current) => [...current, { phase: 'failed', step: 'Funding the job', reason: reasonOf(err) }]);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="action">
      {job.status === 'CREATED' ? (
        <button type="button" className="primary" onClick={() => void fund()} disabled={busy}>
          Fund job
        </button>
      ) : null}
      <ol className="tx-steps">
        {steps.map((state, i) => (
          <li key={i}>
            <TxStatus state={state} />
          </li>
        ))}
      </ol>
    </div>
  );
}

/**
 * One escrow call (`approve`, `dispute`, `claimRefund`) of this job from the wallet, with its
 * state. The button shows while `available`; the state of a call made here stays after the
 * receipt moved on, so its outcome can still be read.
 */
export function EscrowButton({ job, action, available, onMined }: { job: Job; action: EscrowAction; available: boolean; onMined: () => void }) {
  const wallet = useChainWallet();
  const [state, setState] = useState<TxState>({ phase: 'idle' });
  const label = ACTION_LABEL[action];
  const run = async () => {
    let hash: TxHash | null = null;
    try {
      setState({ phase: 'wallet', step: label });
      await wallet.ready();
      const address = wallet.escrow;
      if (!address) throw new Error('This deployment has no escrow contract: gpufarm cannot take escrow actions here.');
      hash = await writeContract(wallet.config, { address, abi: gpuFarmEscrowAbi, functionName: action, args: [job.payment.escrowJobKey as Hex], chainId: wallet.chainId });
      setState({ phase: 'pending', step: label, hash });
      const receipt = await waitForTransactionReceipt(wallet.config, { hash, chainId: wallet.chainId });
      if (receipt.status !== 'success') {
        setState({ phase: 'failed', step: label, reason: 'The transaction reverted on chain.', hash });
        return;
      }
      setState({ phase: 'mined', step: label, hash });
      onMined();
    } catch (err) {
      setState({ phase: 'failed', step: label, reason: reasonOf(err), hash });
    }
  };
  const busy = state.phase === 'wallet' || state.phase === 'pending';
  if (!available && state.phase === 'idle') return null;
  return (
    <div className="action">
      {available ? (
        <button type="button" className={action === 'dispute' ? 'danger' : 'primary'} onClick={() => void run()} disabled={busy}>
          {label}
        </button>
      ) : null}
      <TxStatus state={state} />
    </div>
  );
}
