import { ADMIN_API, type AdminJob, adminJobSchema, disputeListSchema, VERIFICATION_LEVEL_TEXT } from '@gpufarm/shared';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { bytes, tokenAmount, usd, when } from '../../lib/format';
import { Hash } from '../../ui/hash';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { TxStatus, type TxState } from '../../ui/tx-status';
import { JobStart } from '../customer/job-start';
import { TimelineList } from '../customer/job-timeline';
import { StatusBadge } from '../customer/status-badge';
import { Deadline, DisputeReason, ResolveActions } from './disputes-page';

/**
 * Any account's job as an admin reads it before deciding a dispute: the customer's words, the
 * result's hashes and verification level, the outputs to download, the timeline with its
 * transactions, the machine it ran on and the last lines of its log; the resolve actions while
 * the dispute is open.
 */
export function AdminJobPage({ id }: { id: string }) {
  const api = useApi();
  const view = useQuery({
    queryKey: ['admin', 'job', id],
    queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/jobs/${encodeURIComponent(id)}`, schema: adminJobSchema }),
    refetchInterval: 15_000,
  });
  return (
    <Page
      title={`Job ${id}`}
      heading={
        <>
          Job <code>{id}</code> {view.data ? <StatusBadge job={view.data.job} /> : null}
        </>
      }
      actions={<Link href="/disputes">All disputes</Link>}
    >
      <QueryState query={view} loading="Loading the job…" errorTitle={`Could not load job ${id}`}>
        {(v) => (
          <>
            <p className="job-meta">
              {v.timeline.title ? <strong className="job-title">{v.timeline.title}</strong> : <span className="muted">No title</span>}
              {' · customer '}
              <Hash value={v.customer.wallet} label="customer wallet" />
              {v.machineId ? (
                <>
                  {' · ran on '}
                  <Link href={`/machines/${encodeURIComponent(v.machineId)}`}>
                    <code>{v.machineId}</code>
                  </Link>
                  {v.job.assignment ? ` (${v.job.assignment.farm.name}, ${v.job.assignment.gpu.count} × ${v.job.assignment.gpu.model})` : null}
                </>
              ) : null}
            </p>
            {v.dispute ? <DisputeCard view={v} /> : null}
            <ResultCard view={v} />
            <section aria-labelledby="timeline-heading" className="card">
              <h2 id="timeline-heading">Timeline</h2>
              <TimelineList job={v.job} timeline={v.timeline} now={Date.now()} />
            </section>
            <JobStart job={v.job} />
            <LogCard view={v} />
          </>
        )}
      </QueryState>
    </Page>
  );
}

/** The customer's reason and evidence, the deadline, and the escrow's resolve actions while the dispute is open. */
function DisputeCard({ view }: { view: AdminJob }) {
  const api = useApi();
  const dispute = view.dispute!;
  // The open disputes carry the escrow's own amounts the resolve actions name.
  const open = useQuery({ queryKey: ['admin', 'disputes'], queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/disputes`, schema: disputeListSchema }) });
  const row = open.data?.data.find((d) => d.jobId === view.job.id) ?? null;
  const [state, setState] = useState<TxState | null>(null);
  return (
    <section aria-labelledby="dispute-heading" className="card">
      <h2 id="dispute-heading">Dispute</h2>
      <dl className="escrow">
        <div className="escrow-row">
          <dt>Customer&rsquo;s reason</dt>
          <dd>
            <DisputeReason dispute={dispute} />
          </dd>
        </div>
        <div className="escrow-row">
          <dt>Disputed</dt>
          <dd>{dispute.disputedAt ? when(dispute.disputedAt) : '—'}</dd>
        </div>
        <div className="escrow-row">
          <dt>Deadline</dt>
          <dd>{dispute.disputeEndsAt ? <Deadline at={dispute.disputeEndsAt} /> : '—'}</dd>
        </div>
        <div className="escrow-row">
          <dt>Outcome</dt>
          <dd>{view.job.receipt?.disputeOutcome === 'timed_out' ? 'timed out: the whole deposit went back to the customer' : view.job.receipt?.disputeOutcome === 'resolved' ? 'resolved by an admin' : 'open'}</dd>
        </div>
      </dl>
      {state ? <TxStatus state={state} /> : null}
      {row ? <ResolveActions dispute={row} onState={setState} /> : null}
    </section>
  );
}

/** What the machine reported and what the server checked: hashes, verification level, cost, and the artifacts to download. */
function ResultCard({ view }: { view: AdminJob }) {
  const { job } = view;
  const level = job.verificationLevel ? VERIFICATION_LEVEL_TEXT[job.verificationLevel] : null;
  return (
    <section aria-labelledby="result-heading" className="card">
      <h2 id="result-heading">Result</h2>
      <dl className="escrow">
        <div className="escrow-row">
          <dt>Verification</dt>
          <dd>
            {level ? (
              <>
                <strong>{level.label}.</strong> {level.attests} {level.doesNotAttest}
              </>
            ) : (
              'no result yet'
            )}
          </dd>
        </div>
        <div className="escrow-row">
          <dt>Host hash</dt>
          <dd>{job.result?.hostHash ? <Hash value={job.result.hostHash} label="host hash" /> : '—'}</dd>
        </div>
        <div className="escrow-row">
          <dt>Server hash</dt>
          <dd>
            {job.result?.serverHash ? <Hash value={job.result.serverHash} label="server hash" /> : '—'}
            {job.result ? (job.result.hashesMatch ? ' the hashes match' : ' the hashes differ') : null}
          </dd>
        </div>
        <div className="escrow-row">
          <dt>Escrowed result hash</dt>
          <dd>{job.receipt?.resultHash ? <Hash value={job.receipt.resultHash} label="escrowed result hash" /> : '—'}</dd>
        </div>
        <div className="escrow-row">
          <dt>Cost</dt>
          <dd>
            {job.cost ? `${usd(job.cost.totalMicroUsd)} (${job.cost.billableGpuSeconds} GPU-seconds)` : '—'}
            {job.receipt ? ` · payout recorded ${tokenAmount(job.receipt.amount, job.payment.decimals, job.payment.symbol)} of ${tokenAmount(job.payment.maxPayment, job.payment.decimals, job.payment.symbol)} escrowed` : null}
          </dd>
        </div>
      </dl>
      <h3>Outputs</h3>
      {job.artifacts.length === 0 ? (
        <p className="empty">No artifact stored for this job.</p>
      ) : (
        <ul className="artifact-list">
          {job.artifacts.map((a) => (
            <li key={a.id}>
              <a href={`${ADMIN_API}/artifacts/${encodeURIComponent(a.id)}`} download>
                Download {a.filename} ({a.kind}, {bytes(a.sizeBytes)})
              </a>{' '}
              <Hash value={a.sha256} label={`SHA-256 of ${a.filename}`} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** The log's last lines; the whole log is the log artifact above. */
function LogCard({ view }: { view: AdminJob }) {
  const { lines, total } = view.log;
  return (
    <section aria-labelledby="log-heading" className="card">
      <h2 id="log-heading">Log</h2>
      <p className="muted">{total > lines.length ? `The last ${lines.length} of ${total} lines; the log artifact has the whole log.` : `${total} lines.`}</p>
      {lines.length === 0 ? (
        <p className="empty">This job wrote no log lines.</p>
      ) : (
        <pre className="log" role="log" tabIndex={0} aria-label="Log lines">
          {lines.map((l) => (
            <span key={l.id} className={`log-line log-${l.stream}`}>
              {l.line}
              {'\n'}
            </span>
          ))}
        </pre>
      )}
    </section>
  );
}
