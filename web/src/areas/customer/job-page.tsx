import { isTerminalStatus, jobCreateRequestSchema, VERIFICATION_LEVEL_TEXT, type Job, type VerificationLevel } from '@gpufarm/shared';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useState, type ReactNode } from 'react';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { sentence, tokenAmount, usd, when } from '../../lib/format';
import { useSession } from '../../lib/session';
import { Countdown } from '../../ui/countdown';
import { EscrowCallButton } from '../../ui/escrow-call';
import { Hash } from '../../ui/hash';
import { Page } from '../../ui/page';
import { ErrorState, Loading } from '../../ui/states';
import { CancelJob, EscrowButton, FundJob } from './job-actions';
import { JobArtifacts } from './job-artifacts';
import { JobLogs } from './job-logs';
import { RunningCost } from './running-cost';
import { JobMoney } from './job-money';
import { JobStart } from './job-start';
import { Timeline, useJobTimeline } from './job-timeline';
import { jobBadge, StatusBadge } from './status-badge';

/** A level in the words of docs/verification.md (`VERIFICATION_LEVEL_TEXT`): what it shows, then what it does not. */
function VerificationWords({ level }: { level: VerificationLevel }) {
  const text = VERIFICATION_LEVEL_TEXT[level];
  return (
    <>
      <strong>{text.label}.</strong> {text.attests} {text.doesNotAttest}
    </>
  );
}

/** What the page waits for after a wallet action: the job, its receipt or its withdrawal leaving these states. */
interface AwaitChange {
  status: Job['status'];
  receipt: string | null;
  withdrawal: string | null;
}

const awaitFrom = (job: Job): AwaitChange => ({ status: job.status, receipt: job.receipt?.status ?? null, withdrawal: job.receipt?.withdrawal?.status ?? null });
const changed = (job: Job, from: AwaitChange) => {
  const now = awaitFrom(job);
  return now.status !== from.status || now.receipt !== from.receipt || now.withdrawal !== from.withdrawal;
};

/** The job: title, status, timeline (each state's time and transaction), escrow with its transactions and wallet actions, logs and artifacts. */
export default function JobPage({ id }: { id: string }) {
  const { gf } = useApi();
  const queryClient = useQueryClient();
  const [awaiting, setAwaiting] = useState<AwaitChange | null>(null);
  // The funding steps stay on the page after the job left CREATED, so their outcome can be read.
  const [fundingStarted, setFundingStarted] = useState(false);
  const job = useQuery({
    queryKey: ['job', id],
    queryFn: () => gf.jobs.get(id),
    refetchInterval: (query) => {
      const data = query.state.data;
      if (!data) return false;
      if (awaiting && !changed(data, awaiting)) return 1_000;
      const live =
        !isTerminalStatus(data.status) ||
        data.receipt?.status === 'completed' ||
        data.receipt?.status === 'disputed' ||
        data.receipt?.status === 'refund_authorized' ||
        data.receipt?.withdrawal?.status === 'waiting_withdrawal';
      return live ? 3_000 : false;
    },
  });
  const data = job.data;
  const timeline = useJobTimeline(data, id);
  if (awaiting && data && changed(data, awaiting)) setAwaiting(null);
  const watchForChange = useCallback(() => {
    if (data) setAwaiting(awaitFrom(data));
    void queryClient.invalidateQueries({ queryKey: ['job', id] });
  }, [data, id, queryClient]);

  if (job.isPending) return <Loading label="Loading the job…" />;
  if (job.isError) return <ErrorState error={job.error} title={`Could not load job ${id}`} retry={() => void job.refetch()} />;
  const j = job.data;
  return (
    <Page
      title={`Job ${j.id}`}
      heading={
        <>
          Job <code>{j.id}</code> <StatusBadge job={j} />
        </>
      }
      actions={
        <>
          <CancelJob job={j} onDone={watchForChange} />
          <Link href="/jobs">All jobs</Link>
        </>
      }
    >
      {timeline.data ? (
        <p className="job-meta">
          {timeline.data.title ? <strong className="job-title">{timeline.data.title}</strong> : <span className="muted">No title</span>}
          {' · created '}
          <time dateTime={timeline.data.createdAt}>{when(timeline.data.createdAt)}</time>
        </p>
      ) : null}
      {/* The badge's changes, heard by screen readers as they happen (the page polls the job). */}
      <p className="visually-hidden" role="status">
        Job status: {jobBadge(j).label}
      </p>
      {awaiting ? (
        <p className="muted" role="status">
          Waiting for gpufarm to see the transaction…
        </p>
      ) : null}
      <FitNotice job={j} />
      {j.status === 'CREATED' || fundingStarted ? (
        <section aria-labelledby="fund-heading" className="card">
          <h2 id="fund-heading">{j.status === 'CREATED' ? 'Fund this job' : 'Funding'}</h2>
          <p>
            {j.status === 'CREATED' ? 'The job waits for its escrow: at most' : 'Funded: the escrow holds at most'} {tokenAmount(j.payment.maxPayment, j.payment.decimals, j.payment.symbol)} (up to {usd(j.pricing.maxCostMicroUsd)}){j.status === 'CREATED' ? ' is locked' : ''}; what the job does not cost comes back.
          </p>
          <FundJob job={j} onStart={() => setFundingStarted(true)} onDone={watchForChange} />
        </section>
      ) : null}
      <Timeline job={j} timeline={timeline} />
      <JobStart job={j} />
      <Escrow job={j} onMined={watchForChange} />
      <JobMoney job={j} />
      <Details job={j} />
      {timeline.data ? <JobSpec jobId={j.id} spec={timeline.data.spec} /> : null}
      <JobLogs job={j} />
      <JobArtifacts job={j} />
    </Page>
  );
}

/**
 * The challenge window once the escrow left `completed`: it may have closed before its end time,
 * by an approval or a dispute, so the time alone would read as a window still open.
 */
function windowClosed(receipt: Pick<NonNullable<Job['receipt']>, 'status' | 'disputeOutcome'>, endsAt: string): string {
  const early = Date.parse(endsAt) > Date.now();
  if (receipt.status === 'disputed' || receipt.disputeOutcome !== null) return `closed by the dispute${early ? `, before its end (${when(endsAt)})` : ''}`;
  if (receipt.status === 'released' && early) return `closed early: the payment was released before its end (${when(endsAt)})`;
  return `closed at ${when(endsAt)}`;
}

function TxRow({ label, hash, children }: { label: string; hash: string | null; children?: ReactNode }) {
  return (
    <div className="escrow-row">
      <dt>{label}</dt>
      <dd>
        {children}
        {hash ? <Hash value={hash} label={`${label.toLowerCase()} transaction hash`} /> : children ? null : <span className="muted">no transaction yet</span>}
      </dd>
    </div>
  );
}

function Escrow({ job, onMined }: { job: Job; onMined: () => void }) {
  const r = job.receipt;
  const session = useSession();
  const [windowOpen, setWindowOpen] = useState(() => (r?.challengeEndsAt ? Date.parse(r.challengeEndsAt) > Date.now() : false));
  const closeWindow = useCallback(() => setWindowOpen(false), []);
  if (r?.challengeEndsAt && Date.parse(r.challengeEndsAt) > Date.now() && !windowOpen) setWindowOpen(true);
  // Past the dispute's deadline anyone may end it, and the whole deposit comes back.
  const [disputeOpen, setDisputeOpen] = useState(() => (r?.disputeEndsAt ? Date.parse(r.disputeEndsAt) > Date.now() : true));
  const endDispute = useCallback(() => setDisputeOpen(false), []);
  const w = r?.withdrawal ?? null;
  const mine = w !== null && session.data?.address.toLowerCase() === w.wallet.toLowerCase();
  return (
    <section aria-labelledby="escrow-heading" className="card">
      <h2 id="escrow-heading">Escrow</h2>
      {!r ? (
        <p className="muted">
          {job.status === 'CREATED'
            ? 'Not funded yet.'
            : job.status === 'CANCELED' || job.status === 'EXPIRED'
              ? 'The escrow holds nothing for this job.'
              : "The escrow holds the payment; its receipt and transactions appear here when the job completes."}
        </p>
      ) : (
        <>
          <p>
            Escrow status: <strong>{r.status.replace('_', ' ')}</strong>, amount {tokenAmount(r.amount, job.payment.decimals, job.payment.symbol)}
          </p>
          <dl className="escrow">
            <TxRow label="Funded" hash={r.transactions.fund} />
            {r.transactions.completion ? <TxRow label="Completed" hash={r.transactions.completion} /> : null}
            {r.challengeEndsAt ? (
              <TxRow label="Challenge window" hash={null}>
                {r.status === 'completed' ? (
                  <>
                    ends {when(r.challengeEndsAt)}: <Countdown to={r.challengeEndsAt} onEnd={closeWindow} />
                  </>
                ) : (
                  <>{windowClosed(r, r.challengeEndsAt)}</>
                )}
              </TxRow>
            ) : null}
            {r.status === 'disputed' ? (
              <TxRow label="Disputed" hash={null}>
                {r.disputeEndsAt === null ? (
                  'held until gpufarm resolves the dispute'
                ) : disputeOpen ? (
                  <>
                    held until gpufarm resolves the dispute, at the latest {when(r.disputeEndsAt)} (<Countdown to={r.disputeEndsAt} onEnd={endDispute} />); unresolved by then, your whole deposit comes back
                  </>
                ) : (
                  <>unresolved past its deadline ({when(r.disputeEndsAt)}): your whole deposit comes back</>
                )}
              </TxRow>
            ) : null}
            {r.disputeOutcome === 'timed_out' ? (
              <TxRow label="Dispute timed out" hash={null}>
                not resolved by its deadline ({when(r.disputeEndsAt)}): the whole deposit went back to you
              </TxRow>
            ) : null}
            {r.transactions.release ? <TxRow label={r.status === 'released' ? 'Released' : 'Resolved'} hash={r.transactions.release} /> : null}
            {w ? (
              <TxRow label={w.status === 'withdrawn' ? 'Withdrawn' : 'Waiting for withdrawal'} hash={w.withdrawTxHash}>
                {w.status === 'withdrawn' ? null : (
                  <>
                    {tokenAmount(w.amount, job.payment.decimals, job.payment.symbol)} could not be sent to your wallet <code>{w.wallet}</code> at the release; it waits in the escrow until that wallet withdraws it
                  </>
                )}
              </TxRow>
            ) : null}
            {r.status === 'refund_authorized' || r.status === 'refunded' ? <TxRow label={r.status === 'refunded' ? 'Refunded' : 'Refund authorized'} hash={r.transactions.refund} /> : null}
          </dl>
          <div className="actions">
            {r.status === 'completed' && windowOpen ? <p className="muted">Inside the challenge window you can release the payment now, or dispute the result to hold it.</p> : null}
            <EscrowButton job={job} action="approve" available={r.status === 'completed' && windowOpen} onMined={onMined} />
            <EscrowButton job={job} action="dispute" available={r.status === 'completed' && windowOpen} onMined={onMined} />
            <EscrowButton job={job} action="claimRefund" available={r.status === 'refund_authorized'} onMined={onMined} />
            <EscrowButton job={job} action="claimDisputeTimeout" available={r.status === 'disputed' && r.disputeEndsAt !== null && !disputeOpen} onMined={onMined} />
            {w && w.status === 'waiting_withdrawal' && !mine ? <p className="muted">Sign in with the wallet {w.wallet} to withdraw.</p> : null}
            <EscrowCallButton label="Withdraw" call={{ functionName: 'withdraw', token: job.payment.token as `0x${string}` }} available={w?.status === 'waiting_withdrawal' && mine} onMined={onMined} />
          </div>
        </>
      )}
    </section>
  );
}

const WAITING: ReadonlySet<Job['status']> = new Set(['CREATED', 'FUNDED', 'QUEUED', 'MATCHING']);

/** While the job waits for a machine: says when no machine on the market fits it now, and why. */
function FitNotice({ job }: { job: Job }) {
  const api = useApi();
  const waiting = WAITING.has(job.status);
  const fit = useQuery({ queryKey: ['job-fit', job.id], queryFn: () => api.jobs.fit(job.id), enabled: waiting, refetchInterval: 15_000 });
  if (!waiting || !fit.data || fit.data.matched > 0) return null;
  return (
    <section className="notice" aria-labelledby="fit-heading">
      <h2 id="fit-heading">No machine fits this job now</h2>
      <p>{fit.data.reasons.length > 0 ? sentence(fit.data.reasons.join('; ')) : 'No machine on the market matches its requirements and price cap.'}</p>
      <p>
        {job.status === 'CREATED' ? 'Funding it is allowed, and it' : 'It'} waits until one does, as machines come and go. Cancel it to take {job.status === 'CREATED' ? 'nothing' : 'the deposit back'}, or run it again with other requirements.
      </p>
    </section>
  );
}

/** What the job runs, from its accepted spec: image, command, resources; the whole spec as JSON; Run again. */
function JobSpec({ jobId, spec }: { jobId: string; spec: Record<string, unknown> }) {
  const parsed = jobCreateRequestSchema.safeParse(spec);
  const json = JSON.stringify(spec, null, 2);
  const s = parsed.success ? parsed.data : null;
  const command = s?.command ?? [];
  const script = command.length === 3 && command[0] === 'sh' && command[1] === '-c' ? command[2]! : null;
  return (
    <section aria-labelledby="spec-heading" className="card">
      <h2 id="spec-heading">What it runs</h2>
      {s ? (
        <dl className="details">
          <dt>Image</dt>
          <dd>
            <code className="hash-full">{s.imageDigest && !s.image.includes('@') ? `${s.image}@${s.imageDigest}` : s.image}</code>
          </dd>
          <dt>Command</dt>
          <dd>{command.length === 0 ? "the image's own" : script !== null ? <pre className="spec">{script}</pre> : <code>{command.map((a) => JSON.stringify(a)).join(' ')}</code>}</dd>
          <dt>GPUs</dt>
          <dd>
            {s.gpu.count}
            {s.gpu.modelAllowlist?.length ? ` of ${s.gpu.modelAllowlist.join(' or ')}` : ', any class that fits'}
            {s.gpu.minimumVramGb !== undefined ? `, at least ${s.gpu.minimumVramGb} GB each` : ''}
          </dd>
          <dt>Runtime limit</dt>
          <dd>{s.maxRuntimeSeconds !== undefined ? `${Math.ceil(s.maxRuntimeSeconds / 60)} minutes` : '—'}</dd>
          <dt>Network</dt>
          <dd>{s.networkPolicy?.mode === 'allowlist' ? `only ${s.networkPolicy.allow.join(', ')}` : 'none'}</dd>
          <dt>Environment</dt>
          <dd>{s.env && Object.keys(s.env).length > 0 ? Object.keys(s.env).join(', ') : 'none'}</dd>
        </dl>
      ) : (
        <p className="muted">This job's spec does not read as today's job schema; its JSON is below.</p>
      )}
      <details>
        <summary>The spec as JSON (for gf run -f)</summary>
        <pre className="spec" tabIndex={0} aria-label={`Spec of job ${jobId} as JSON`}>
          {json}
        </pre>
      </details>
      <Link href={`/jobs/new?from=${encodeURIComponent(jobId)}`} className="button-link">
        Run again
      </Link>
    </section>
  );
}

function Details({ job }: { job: Job }) {
  const a = job.assignment;
  return (
    <section aria-labelledby="details-heading" className="card">
      <h2 id="details-heading">Details</h2>
      <dl className="details">
        <dt>GPU</dt>
        <dd>{a ? `${a.gpu.count} × ${a.gpu.model}` : 'not assigned yet'}</dd>
        <dt>Farm</dt>
        <dd>{a ? a.farm.name : '—'}</dd>
        <dt>Region</dt>
        <dd>{a ? a.region : '—'}</dd>
        <dt>Price</dt>
        <dd>{a ? `${usd(a.pricePerGpuHourMicroUsd)} per GPU-hour` : `at most ${usd(job.pricing.maxPricePerGpuHourMicroUsd)} per GPU-hour`}</dd>
        <dt>Cost</dt>
        <dd>
          {job.cost ? (
            `${usd(job.cost.totalMicroUsd)} (${usd(job.cost.computeMicroUsd)} compute for ${job.cost.billableGpuSeconds} GPU-seconds + ${usd(job.cost.feeMicroUsd)} fee)`
          ) : job.status === 'RUNNING' && a?.startedAt ? (
            <RunningCost job={job} />
          ) : (
            `estimated ${usd(job.pricing.estimateLowMicroUsd)}–${usd(job.pricing.estimateHighMicroUsd)}, at most ${usd(job.pricing.maxCostMicroUsd)}`
          )}
        </dd>
        <dt>Exit code</dt>
        <dd>{a?.exitCode ?? '—'}</dd>
        <dt>Verification</dt>
        <dd>{job.verificationLevel ? <VerificationWords level={job.verificationLevel} /> : 'Decided when the job has a result.'}</dd>
      </dl>
    </section>
  );
}
