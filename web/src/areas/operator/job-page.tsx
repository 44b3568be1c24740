import { OPERATOR_API, type OperatorJob, operatorJobSchema, VERIFICATION_LEVEL_TEXT, verificationLevelSchema } from '@gpufarm/shared';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { duration, tokenAmount, usd, when } from '../../lib/format';
import { Hash } from '../../ui/hash';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Table } from '../../ui/table';
import { stateOf } from './earnings-page';

/**
 * A customer job as its farm sees it (linked from Earnings and a machine's recent jobs): what
 * the farm earns from it and where the escrow is, each run on the farm's machines, and the
 * result the escrow pays for. Not the customer's log or output.
 */
export function OperatorJobPage({ id }: { id: string }) {
  const api = useApi();
  const job = useQuery({
    queryKey: ['operator', 'job', id],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/jobs/${encodeURIComponent(id)}`, schema: operatorJobSchema }),
    refetchInterval: 15_000,
  });
  return (
    <Page title={`Job ${id}`} heading={<>Job <code>{id}</code></>} actions={<Link href="/earnings">Earnings</Link>}>
      <QueryState query={job} loading="Loading the job…" errorTitle={`Could not load job ${id}`}>
        {(j) => (
          <>
            <EarningCard job={j} />
            <section aria-labelledby="runs-heading">
              <h2 id="runs-heading">Runs on your machines</h2>
              <Table
                caption="Runs on your machines"
                rows={j.runs}
                rowKey={(r) => String(r.attempt)}
                columns={[
                  { header: 'Attempt', cell: (r) => `${r.attempt}${r.result ? ' (the result)' : ''}`, className: 'num' },
                  { header: 'Machine', cell: (r) => <Link href={`/machines/${encodeURIComponent(r.machineId)}`}>{r.machineId}</Link> },
                  { header: 'GPUs', cell: (r) => `${r.gpuCount} × ${r.gpuModel}` },
                  { header: 'Price', cell: (r) => `${usd(r.pricePerGpuHourMicroUsd)}/GPU-hour`, className: 'num' },
                  { header: 'Started', cell: (r) => when(r.startedAt) },
                  { header: 'Ran for', cell: (r) => (r.startedAt && r.finishedAt ? duration((Date.parse(r.finishedAt) - Date.parse(r.startedAt)) / 1000) : '—'), className: 'num' },
                  { header: 'Ended', cell: (r) => (r.failureCode ? `${r.failureCode}${r.failureMessage ? `: ${r.failureMessage}` : ''}` : r.exitCode !== null ? `exit code ${r.exitCode}` : r.finishedAt ? 'finished' : 'running') },
                ]}
              />
            </section>
          </>
        )}
      </QueryState>
    </Page>
  );
}

/** What the farm earns from the job, where the escrow is with it, and the result it pays for. */
function EarningCard({ job }: { job: OperatorJob }) {
  const e = job.earning;
  const level = verificationLevelSchema.safeParse(job.verificationLevel);
  return (
    <section aria-labelledby="earning-heading" className="card">
      <h2 id="earning-heading">Earning</h2>
      <dl className="escrow">
        <div className="escrow-row">
          <dt>Job status</dt>
          <dd>{job.status}</dd>
        </div>
        <div className="escrow-row">
          <dt>Earned</dt>
          <dd>
            {e ? (
              <>
                {tokenAmount(e.amount, e.decimals, e.symbol)} ({stateOf(e)}){e.fee ? `, after gpufarm's fee of ${tokenAmount(e.fee, e.decimals, e.symbol)}` : ''}
              </>
            ) : (
              'nothing yet: a job earns once its result from your machine is recorded on the escrow'
            )}
          </dd>
        </div>
        {e ? (
          <>
            <div className="escrow-row">
              <dt>Challenge window ends</dt>
              <dd>{when(e.challengeEndsAt)}</dd>
            </div>
            <div className="escrow-row">
              <dt>Released</dt>
              <dd>{e.releaseTxHash ? <Hash value={e.releaseTxHash} label="release transaction hash" /> : e.releasedAt ? when(e.releasedAt) : 'not yet'}</dd>
            </div>
          </>
        ) : null}
        <div className="escrow-row">
          <dt>Completion</dt>
          <dd>{job.completionTxHash ? <Hash value={job.completionTxHash} label="completion transaction hash" /> : 'not recorded on the escrow yet'}</dd>
        </div>
        <div className="escrow-row">
          <dt>Billed</dt>
          <dd>{job.billableGpuSeconds !== null ? `${job.billableGpuSeconds} GPU-seconds` : '—'}</dd>
        </div>
        <div className="escrow-row">
          <dt>Result</dt>
          <dd>
            {job.resultHash ? <Hash value={job.resultHash} label="result hash" /> : 'none yet'}
            {level.success ? ` ${VERIFICATION_LEVEL_TEXT[level.data].label}` : null}
          </dd>
        </div>
      </dl>
    </section>
  );
}
