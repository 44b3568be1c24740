import type { FleetEvent, GpuHealthView, GpuProof, MachineHistory, MachineStartTimes, RecentJob } from '@gpufarm/shared';
import { useMemo } from 'react';
import { Link } from 'wouter';
import { bytes, duration, millis, when } from '../lib/format';
import { VerdictBadge } from './badges';
import { TimeChart, type ChartSeries } from './chart';
import { Table } from './table';

/** What a machine page of either area shows the same way: GPUs, history charts, events, recent jobs. */

export function GpuTable({ gpus }: { gpus: Pick<GpuHealthView, 'index' | 'classId' | 'verdict' | 'reasons'>[] }) {
  if (gpus.length === 0) return <p className="muted">No GPUs on offer from this machine.</p>;
  return (
    <Table
      caption="GPUs"
      rows={gpus}
      rowKey={(g) => String(g.index)}
      columns={[
        { header: 'GPU', cell: (g) => g.index, className: 'num' },
        { header: 'Class', cell: (g) => g.classId },
        { header: 'Health', cell: (g) => <VerdictBadge verdict={g.verdict} /> },
        { header: 'Reasons', cell: (g) => (g.reasons.length ? g.reasons.join('; ') : <span className="muted">none</span>) },
      ]}
    />
  );
}

const METRICS = [
  { key: 'utilizationPercent', title: 'Utilization', format: (v: number) => `${Math.round(v)} %` },
  { key: 'temperatureC', title: 'Temperature', format: (v: number) => `${Math.round(v)} °C` },
  { key: 'memoryUsedBytes', title: 'Memory used', format: (v: number) => bytes(v) },
  { key: 'powerWatts', title: 'Power', format: (v: number) => `${Math.round(v)} W` },
] as const;

/**
 * One chart per metric with a line per GPU; the GPUs share the first GPU's times (the server
 * aligns them). A metric no GPU reported in the range is said in words, not drawn as a chart of
 * gaps: a simulated GPU reports no figures at all, a real one's driver may leave one out.
 */
export function MachineHistoryCharts({ history, rangeSeconds, simulated = false }: { history: MachineHistory; rangeSeconds?: number; simulated?: boolean }) {
  const t = history.gpus[0]?.t ?? [];
  const to = t.at(-1) ?? Math.floor(Date.now() / 1000);
  const span = rangeSeconds ? { from: to - rangeSeconds, to } : undefined;
  const charts = useMemo(
    () =>
      METRICS.map((m) => ({
        ...m,
        series: history.gpus.map((g): ChartSeries => ({ label: `GPU ${g.index}`, values: g[m.key] })),
        reported: history.gpus.some((g) => g[m.key].some((v) => v !== null)),
      })),
    [history],
  );
  if (history.gpus.length === 0) return <p className="muted">No samples recorded for this machine in this range.</p>;
  const unreported = charts.filter((c) => !c.reported).map((c) => c.title.toLowerCase());
  return (
    <div className="charts">
      {unreported.length > 0 ? (
        <p className="muted">
          {simulated
            ? `This machine's GPUs are simulated: its ${history.gpus[0]!.t.length} samples in this range carry no ${unreported.join(', ')} (a simulated GPU reports no figures).`
            : `No ${unreported.join(', ')} reported by this machine's GPUs in this range: their driver gave no reading.`}
        </p>
      ) : null}
      {charts
        .filter((c) => c.reported)
        .map((c) => (
          <TimeChart key={c.key} title={`${c.title} per GPU (one point per ${duration(history.resolutionSeconds)})`} t={t} series={c.series} format={c.format} span={span} />
        ))}
    </div>
  );
}

export function EventsTable({ events, caption }: { events: FleetEvent[]; caption: string }) {
  return (
    <Table
      caption={caption}
      rows={events}
      rowKey={(e) => e.id}
      columns={[
        { header: 'When', cell: (e) => when(e.at) },
        { header: 'Event', cell: (e) => <code>{e.type}</code> },
        { header: 'What happened', cell: (e) => e.message },
      ]}
    />
  );
}

export function RecentJobsTable({ jobs }: { jobs: RecentJob[] }) {
  if (jobs.length === 0) return <p className="muted">No job ran on this machine yet.</p>;
  return (
    <Table
      caption="Recent jobs"
      rows={jobs}
      rowKey={(j) => j.jobId}
      columns={[
        // Each area has its job page at /jobs/:id (the admin's, the operator's).
        { header: 'Job', cell: (j) => <Link href={`/jobs/${encodeURIComponent(j.jobId)}`}>{j.jobId}</Link> },
        { header: 'Status', cell: (j) => j.status },
        { header: 'Started', cell: (j) => when(j.startedAt) },
        { header: 'Finished', cell: (j) => when(j.finishedAt) },
        { header: 'Failure', cell: (j) => j.failureCode ?? '—' },
      ]}
    />
  );
}

/**
 * How fast the machine starts the jobs it is offered: p50 and p95 from the offer to running and
 * to the job's first own line, over its recent runs (the control plane's clock).
 */
export function StartTimesSection({ times }: { times: MachineStartTimes }) {
  const rows = [
    { what: 'Offer to running', figure: times.toRunningMs },
    { what: 'Offer to first log line', figure: times.toFirstLogMs },
  ];
  return (
    <section aria-labelledby="start-times-heading">
      <h2 id="start-times-heading">Start times</h2>
      <p className="muted">
        Over its last {times.maxRuns} runs in {times.sinceDays} days that reached running, timed by the service as it received the machine's reports. The wait in the queue is not the machine's and is left out.
      </p>
      {times.toRunningMs.runs === 0 ? (
        <p className="muted">No run reached running in that time.</p>
      ) : (
        <Table
          caption="Start times"
          rows={rows}
          rowKey={(r) => r.what}
          columns={[
            { header: 'From the offer to', cell: (r) => r.what },
            { header: 'p50', cell: (r) => millis(r.figure.p50) },
            { header: 'p95', cell: (r) => millis(r.figure.p95) },
            { header: 'Runs', cell: (r) => String(r.figure.runs) },
          ]}
        />
      )}
    </section>
  );
}

/**
 * Whether the machine's GPUs are proven and since when, in the words of the earning verdict:
 * proven on a date, being proven, not proven (with why, unless `withReason` is false where the
 * verdict beside it says it), or simulated (nothing to prove).
 */
export function gpuProofText(p: GpuProof, { withReason = true }: { withReason?: boolean } = {}): string {
  const reason = withReason ? p.reason : null;
  if (p.verification === 'verifying') return `Proving its GPUs (a GPU challenge is running)${p.provenAt ? `; last proven ${when(p.provenAt)}` : ''}`;
  if (p.verification === 'failed') return reason ? `Not proven: ${reason}` : 'Not proven: its verification failed';
  if (p.verification === 'unverified') return `Not proven yet${reason ? `: ${reason}` : ': a GPU challenge runs once the agent is connected'}`;
  if (p.simulated) return 'Simulated GPUs: nothing to prove, offered as simulated';
  return p.provenAt ? `GPUs proven ${when(p.provenAt)}` : 'Verified without a GPU challenge (no agent)';
}
