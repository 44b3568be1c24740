import { billingSums, isTerminalStatus, type BillingEntry, type Job } from '@gpufarm/shared';
import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { useApi } from '../../lib/api';
import { usd } from '../../lib/format';
import { Hash } from '../../ui/hash';
import { QueryState } from '../../ui/query-state';

function MoneyRow({ label, amount, entries, children }: { label: string; amount: bigint; entries: readonly BillingEntry[]; children?: ReactNode }) {
  const hashes = [...new Set(entries.flatMap((e) => (e.txHash ? [e.txHash] : [])))];
  return (
    <div className="escrow-row">
      <dt>{label}</dt>
      <dd>
        <span className="num">{usd(amount)}</span>
        {children ? <> {children}</> : null}
        {hashes.map((hash) => (
          <span key={hash}>
            {' '}
            <Hash value={hash} label={`${label.toLowerCase()} transaction hash`} />
          </span>
        ))}
      </dd>
    </div>
  );
}

/**
 * The job's money as its billing entries record it: the deposit, what it was charged (compute +
 * fee, less a dispute's credit), what came back to the wallet, and what the escrow still holds.
 * The same sums as the billing page (`billingSums`).
 */
export function JobMoney({ job }: { job: Job }) {
  const { gf } = useApi();
  // The entries change with the job's escrow record: refetched when the page sees that change.
  const entries = useQuery({
    queryKey: ['job-billing', job.id, job.status, job.receipt?.status ?? null],
    queryFn: async () => {
      const all: BillingEntry[] = [];
      for await (const entry of gf.billing.listAll({ jobId: job.id, limit: 50 })) all.push(entry);
      return all;
    },
    enabled: job.status !== 'CREATED',
  });
  if (job.status === 'CREATED') return null;
  return (
    <section aria-labelledby="money-heading" className="card">
      <h2 id="money-heading">Money</h2>
      <QueryState query={entries} loading="Adding up the job's billing…" errorTitle="Could not load the job's billing" isEmpty={(list) => list.length === 0} empty={{ title: 'No billing yet', body: <p>The deposit shows here once gpufarm has seen it on chain.</p> }}>
        {(list) => {
          const sums = billingSums(list);
          const of = (...types: BillingEntry['type'][]) => list.filter((e) => types.includes(e.type));
          const credited = of('credit').length > 0;
          return (
            <dl className="escrow">
              <MoneyRow label="Deposit" amount={sums.funded} entries={of('funded')} />
              <MoneyRow label="Charged" amount={sums.charged} entries={of('charge', 'credit')}>
                {credited ? (
                  <span className="muted">after the dispute's outcome credited part of the charge back</span>
                ) : job.cost && of('charge').length > 0 ? (
                  <span className="muted">
                    {usd(job.cost.computeMicroUsd)} compute + {usd(job.cost.feeMicroUsd)} fee
                  </span>
                ) : of('charge').length === 0 ? (
                  <span className="muted">{isTerminalStatus(job.status) ? 'none: the job ended without a charge' : 'nothing yet: the charge is recorded when the job completes'}</span>
                ) : null}
              </MoneyRow>
              <MoneyRow label="Returned to your wallet" amount={sums.returned} entries={of('release', 'refund')} />
              {sums.held > 0n ? (
                <div className="escrow-row">
                  <dt>Still in escrow</dt>
                  <dd>
                    <span className="num">{usd(sums.held)}</span> <span className="muted">{heldWords(job)}</span>
                  </dd>
                </div>
              ) : null}
            </dl>
          );
        }}
      </QueryState>
    </section>
  );
}

/** Why the escrow still holds part of the deposit, from the job's escrow record. */
function heldWords(job: Job): string {
  switch (job.receipt?.status) {
    case 'completed':
      return 'the charge goes to the farm and the rest back to you when the challenge window ends or you approve';
    case 'disputed':
      return 'held until the dispute is resolved';
    case 'refund_authorized':
      return 'the refund waits for your claim';
    default:
      return 'what the job does not cost comes back to your wallet when it is paid out';
  }
}
