import { ADMIN_API, type Dispute, disputeListSchema, resolvedDisputeSchema } from '@gpufarm/shared';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useState } from 'react';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { tokenAmount, when } from '../../lib/format';
import { ConfirmButton } from '../../ui/confirm';
import { Countdown } from '../../ui/countdown';
import { Hash } from '../../ui/hash';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Table } from '../../ui/table';
import { TxStatus, type TxState } from '../../ui/tx-status';

type Outcome = 'release' | 'refund';

/**
 * Disputed jobs, each resolved by the escrow's `resolveDispute` before its deadline: release pays
 * the farm as recorded, refund returns everything to the customer. Past the deadline the escrow
 * only returns the whole deposit to the customer (the escrow worker sends that).
 */
export function DisputesPage() {
  const api = useApi();
  const disputes = useQuery({ queryKey: ['admin', 'disputes'], queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/disputes`, schema: disputeListSchema }), refetchInterval: 15_000 });
  const [results, setResults] = useState<Record<string, TxState>>({});
  const setResult = (jobId: string, state: TxState) => setResults((r) => ({ ...r, [jobId]: state }));
  const resolved = Object.entries(results);
  return (
    <Page title="Disputes">
      {resolved.length ? (
        <section aria-labelledby="resolved-heading" className="card">
          <h2 id="resolved-heading">Resolutions sent from this page</h2>
          <ul className="tx-steps">
            {resolved.map(([jobId, state]) => (
              <li key={jobId}>
                <TxStatus state={state} />
              </li>
            ))}
          </ul>
        </section>
      ) : null}
      <QueryState
        query={disputes}
        loading="Loading disputes…"
        errorTitle="Could not load the disputes"
        isEmpty={(d) => d.data.length === 0}
        empty={{ title: 'No open dispute', body: <p>A customer’s dispute inside the challenge window appears here until an admin resolves it or its deadline passes.</p> }}
      >
        {(d) => (
          <Table
            caption="Open disputes"
            rows={d.data}
            rowKey={(row) => row.jobId}
            columns={[
              { header: 'Job', cell: (row) => <Link href={`/jobs/${encodeURIComponent(row.jobId)}`}><code>{row.jobId}</code></Link> },
              { header: "Customer's reason", cell: (row) => <DisputeReason dispute={row} /> },
              { header: 'Disputed', cell: (row) => when(row.disputedAt) },
              { header: 'Deadline', cell: (row) => (row.disputeEndsAt ? <Deadline at={row.disputeEndsAt} /> : '—') },
              { header: 'Customer', cell: (row) => <Hash value={row.customer} label="customer wallet" /> },
              { header: 'Farm payout', cell: (row) => <Hash value={row.provider} label="farm payout wallet" /> },
              { header: 'Escrowed', cell: (row) => tokenAmount(row.amount, row.decimals, row.symbol), className: 'num' },
              { header: 'Recorded payout', cell: (row) => `${tokenAmount(row.payout, row.decimals, row.symbol)}${row.fee === null ? '' : ` (fee ${tokenAmount(row.fee, row.decimals, row.symbol)})`}`, className: 'num' },
              { header: 'Resolve', cell: (row) => <ResolveActions dispute={row} onState={(s) => setResult(row.jobId, s)} /> },
            ]}
          />
        )}
      </QueryState>
    </Page>
  );
}

/** The customer's words, the evidence behind a disclosure; a dispute sent without the dashboard has none. */
export function DisputeReason({ dispute }: { dispute: Pick<Dispute, 'reason' | 'evidence'> }) {
  if (!dispute.reason) return <span className="muted">none given (disputed outside the dashboard)</span>;
  return (
    <div className="dispute-reason">
      <p>{dispute.reason}</p>
      {dispute.evidence ? (
        <details>
          <summary>Evidence</summary>
          <p className="pre-wrap">{dispute.evidence}</p>
        </details>
      ) : null}
    </div>
  );
}

export function ResolveActions({ dispute, onState }: { dispute: Dispute; onState: (state: TxState) => void }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const resolve = useMutation({
    mutationFn: async (outcome: Outcome) => {
      const step = `${outcome === 'release' ? 'Release' : 'Refund'} job ${dispute.jobId}`;
      onState({ phase: 'sending', step });
      try {
        const answer = await api.request({ method: 'POST', path: `${ADMIN_API}/jobs/${encodeURIComponent(dispute.jobId)}/resolve-dispute`, body: { outcome }, schema: resolvedDisputeSchema });
        onState({ phase: 'mined', step, hash: answer.txHash });
      } catch (err) {
        onState({ phase: 'failed', step, reason: reasonOf(err) });
        throw err;
      }
    },
    onSettled: () => void queryClient.invalidateQueries({ queryKey: ['admin'] }),
  });
  const amount = (units: string) => tokenAmount(units, dispute.decimals, dispute.symbol);
  const total = BigInt(dispute.amount);
  return (
    <div className="actions-row">
      <ConfirmButton label="Release" title={`Release job ${dispute.jobId} to the farm?`} run={() => resolve.mutateAsync('release')}>
        <p>
          The escrow pays the recorded payout of {amount(dispute.payout)} ({dispute.fee === null ? 'gpufarm’s fee included' : `the fee of ${amount(dispute.fee)} included`}) and returns {amount(String(total - BigInt(dispute.payout)))} to the customer.
        </p>
      </ConfirmButton>
      <ConfirmButton label="Refund" title={`Refund job ${dispute.jobId} to the customer?`} danger run={() => resolve.mutateAsync('refund')}>
        <p>The escrow returns all {amount(dispute.amount)} to the customer; the farm and gpufarm get nothing.</p>
      </ConfirmButton>
    </div>
  );
}

/** The dispute's deadline and the time left; once past, that the deposit goes back to the customer. */
export function Deadline({ at }: { at: string }) {
  const [past, setPast] = useState(() => Date.parse(at) <= Date.now());
  const end = useCallback(() => setPast(true), []);
  return past ? (
    <>{when(at)}: passed, the whole deposit goes back to the customer</>
  ) : (
    <>
      {when(at)} (<Countdown to={at} onEnd={end} />)
    </>
  );
}
