import type { FundStep } from '@gpufarm/client/browser';
import type { Job } from '@gpufarm/shared';
import { useState } from 'react';
import type { Hex } from 'viem';
import { getWalletClient } from 'wagmi/actions';
import { anyAnswer, useApi } from '../../lib/api';
import { DASHBOARD_API } from '../../lib/session-api';
import { reasonOf } from '../../lib/errors';
import { tokenAmount, usd } from '../../lib/format';
import { ConfirmButton } from '../../ui/confirm';
import { EscrowCallButton, useChainWallet, type EscrowConfirm } from '../../ui/escrow-call';
import { TxStatus, type TxState } from '../../ui/tx-status';

type EscrowAction = 'approve' | 'dispute' | 'claimRefund' | 'claimDisputeTimeout';

const ACTION_LABEL: Record<EscrowAction, string> = { approve: 'Approve early', dispute: 'Dispute', claimRefund: 'Claim refund', claimDisputeTimeout: 'Reclaim deposit' };

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
 * One escrow call of this job (`approve`, `dispute`, `claimRefund`, `claimDisputeTimeout`) from
 * the wallet, with its state (see `EscrowCallButton`).
 */
export function EscrowButton({ job, action, available, onMined }: { job: Job; action: EscrowAction; available: boolean; onMined: () => void }) {
  const api = useApi();
  const [reason, setReason] = useState('');
  const [evidence, setEvidence] = useState('');
  let confirm = confirmOf(job, action);
  if (confirm && action === 'dispute') {
    confirm = {
      ...confirm,
      body: (
        <>
          {confirm.body}
          <label className="field">
            <span>Why do you dispute the result? (required; the admin who decides reads it)</span>
            <textarea value={reason} onChange={(e) => setReason(e.target.value)} rows={3} maxLength={500} required />
          </label>
          <label className="field">
            <span>Evidence (optional: what you expected, what you got, file names and hashes)</span>
            <textarea value={evidence} onChange={(e) => setEvidence(e.target.value)} rows={4} maxLength={4000} />
          </label>
        </>
      ),
      prepare: () =>
        api.request({
          method: 'POST',
          path: `${DASHBOARD_API}/jobs/${encodeURIComponent(job.id)}/dispute-reason`,
          body: { reason, ...(evidence.trim() ? { evidence } : {}) },
          schema: anyAnswer,
        }),
    };
  }
  return <EscrowCallButton label={ACTION_LABEL[action]} call={{ functionName: action, jobKey: job.payment.escrowJobKey as Hex }} available={available} danger={action === 'dispute'} confirm={confirm} onMined={onMined} />;
}

/**
 * What Approve early and Dispute move, asked before the wallet is: both end the challenge
 * window, one paying out now and one holding the deposit. Claims need no question: they only
 * return the customer's own money.
 */
function confirmOf(job: Job, action: EscrowAction): EscrowConfirm | undefined {
  const r = job.receipt;
  if (!r || (action !== 'approve' && action !== 'dispute')) return undefined;
  const amount = (units: bigint | string) => tokenAmount(units, job.payment.decimals, job.payment.symbol);
  const back = BigInt(job.payment.maxPayment) - BigInt(r.amount);
  const cost = job.cost ? ` (${usd(job.cost.totalMicroUsd)})` : '';
  if (action === 'approve') {
    return {
      title: `Release the payment for job ${job.id} now?`,
      confirmLabel: 'Approve and release',
      body: (
        <p>
          {amount(r.amount)}
          {cost} goes to the machine's farm and gpufarm's fee{back > 0n ? `, and the rest of your deposit, ${amount(back)}, comes back to your wallet` : ''}. The challenge window closes: the result can no longer be disputed.
        </p>
      ),
    };
  }
  return {
    title: `Dispute the result of job ${job.id}?`,
    confirmLabel: 'Dispute and hold the payment',
    body: (
      <p>
        The escrow holds the whole deposit, {amount(job.payment.maxPayment)}, and pays nobody until gpufarm resolves the dispute. If it is not resolved by its deadline, your whole deposit comes back. Approving early is no longer possible.
      </p>
    ),
  };
}

/** The states `POST /v1/jobs/:id/cancel` accepts (the spec's cancel table); a running job is 409. */
const CANCELABLE: ReadonlySet<Job['status']> = new Set(['CREATED', 'FUNDED', 'QUEUED']);

/**
 * "Cancel job" for a job no machine has started, after a confirmation that says what happens to
 * the deposit: nothing was paid for a CREATED job; a funded one's refund becomes claimable here
 * (the Escrow card's "Claim refund").
 */
export function CancelJob({ job, onDone }: { job: Job; onDone: () => void }) {
  const { gf } = useApi();
  if (!CANCELABLE.has(job.status)) return null;
  const funded = job.status !== 'CREATED';
  return (
    <ConfirmButton label="Cancel job" title={`Cancel job ${job.id}?`} confirmLabel="Cancel the job" dismissLabel="Keep the job" danger run={() => gf.jobs.cancel(job.id, { reason: 'canceled from the dashboard' })} onDone={onDone}>
      <p>
        {funded
          ? `No machine has started it. The escrow's deposit of ${tokenAmount(job.payment.maxPayment, job.payment.decimals, job.payment.symbol)} becomes a refund you claim with your wallet on this page.`
          : 'It is not funded: nothing was paid and nothing comes back.'}
      </p>
    </ConfirmButton>
  );
}
