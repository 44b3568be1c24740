import { ADMIN_API, type AdminMachineDetail, adminMachineDetailSchema, drainStateSchema, type GpuChallenge, machineHistorySchema } from '@gpufarm/shared';
import { keepPreviousData, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { anyAnswer, useApi } from '../../lib/api';
import { duration, percent, usd, when } from '../../lib/format';
import { MachineStateBadge, VerdictBadge } from '../../ui/badges';
import { ConfirmButton } from '../../ui/confirm';
import { Hash } from '../../ui/hash';
import { EventsTable, GpuTable, gpuProofText, MachineHistoryCharts, RecentJobsTable, StartTimesSection } from '../../ui/machine-parts';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Table } from '../../ui/table';

const RANGES = ['1h', '24h', '7d', '30d'] as const;
const RANGE_SECONDS: Record<(typeof RANGES)[number], number> = { '1h': 3600, '24h': 86_400, '7d': 7 * 86_400, '30d': 30 * 86_400 };

/** One machine as an admin sees it: its state and health, its GPU proof, per-GPU history, recent jobs, and the actions on it. */
export function MachinePage({ id }: { id: string }) {
  const api = useApi();
  const machine = useQuery({
    queryKey: ['admin', 'machine', id],
    queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/machines/${encodeURIComponent(id)}`, schema: adminMachineDetailSchema }),
    refetchInterval: 10_000,
  });
  return (
    <Page title={`Machine ${id}`} actions={<Link href="/machines">All machines</Link>}>
      <QueryState query={machine} loading="Loading the machine…" errorTitle="Could not load this machine">
        {(detail) => (
          <>
            <MachineSummary detail={detail} />
            <MachineActions detail={detail} />
            <section aria-labelledby="gpus-heading">
              <h2 id="gpus-heading">GPUs</h2>
              <GpuTable gpus={detail.gpus} />
            </section>
            <GpuProofSection detail={detail} />
            <History id={id} simulated={detail.gpuProof?.simulated ?? false} />
            <StartTimesSection times={detail.startTimes} />
            <section aria-labelledby="jobs-heading">
              <h2 id="jobs-heading">Recent jobs</h2>
              <RecentJobsTable jobs={detail.recentJobs} />
            </section>
          </>
        )}
      </QueryState>
    </Page>
  );
}

function MachineSummary({ detail: { machine: m } }: { detail: AdminMachineDetail }) {
  return (
    <section className="card" aria-labelledby="summary-heading">
      <h2 id="summary-heading">Summary</h2>
      <dl className="details">
        <dt>State</dt>
        <dd>
          <MachineStateBadge state={m.state} />
          {m.drainRequested ? ` draining${m.drainDeadline ? `, deadline ${when(m.drainDeadline)}` : ', no deadline'}` : ''}
          {m.cordoned ? ' (cordoned: not offered, the agent is not told)' : ''}
        </dd>
        <dt>Health</dt>
        <dd>
          <VerdictBadge verdict={m.verdict} /> {m.healthReason ?? m.verdictReasons.join('; ')}
        </dd>
        <dt>Farm</dt>
        <dd>{m.farm.slug}</dd>
        <dt>Region</dt>
        <dd>{m.regionKey}</dd>
        <dt>GPUs</dt>
        <dd>
          {m.gpuCount} × {m.classIds.join(', ')}
        </dd>
        <dt>Price</dt>
        <dd>{m.pricePerGpuHourMicroUsd == null ? 'no price set' : `${usd(m.pricePerGpuHourMicroUsd)} per GPU-hour`}</dd>
        <dt>Agent / driver / CUDA</dt>
        <dd>
          {m.agentVersion ?? '—'} / {m.driverVersion ?? '—'} / {m.cudaVersion ?? '—'}
        </dd>
        <dt>Benchmark tier</dt>
        <dd>{m.benchmarkTier ?? 'not verified yet'}</dd>
        <dt>Last heartbeat</dt>
        <dd>
          {when(m.lastHeartbeatAt)} ({duration(m.heartbeatAgeSeconds)} ago)
        </dd>
        <dt>Utilization</dt>
        <dd>{percent(m.utilizationPercent)}</dd>
        <dt>Failures in 7 days</dt>
        <dd>{m.failures7d}</dd>
      </dl>
    </section>
  );
}

/** Whether the GPUs are proven and when, the next idle re-check, and the recent challenges with their seeds, times and checks. */
function GpuProofSection({ detail: { gpuProof: p, challenges } }: { detail: AdminMachineDetail }) {
  return (
    <section aria-labelledby="proof-heading">
      <h2 id="proof-heading">GPU proof</h2>
      {p === null ? null : (
        <dl className="details">
          <dt>Proof</dt>
          <dd>{gpuProofText(p)}</dd>
          <dt>Verified since</dt>
          <dd>{p.verification === 'verified' ? when(p.verifiedAt) : 'not verified'}</dd>
          <dt>Next idle re-check</dt>
          <dd>{p.nextChallengeAt ? when(p.nextChallengeAt) : 'none scheduled'}</dd>
        </dl>
      )}
      {challenges.length === 0 ? (
        <p className="muted">No GPU challenge ran on this machine yet.</p>
      ) : (
        <Table
          caption="Recent GPU challenges"
          rows={challenges}
          rowKey={(c) => c.id}
          columns={[
            { header: 'Started', cell: (c) => <span title={c.id}>{when(c.createdAt)}</span> },
            { header: 'Cause', cell: (c) => c.cause.replace('_', ' ') },
            { header: 'State', cell: (c) => c.state },
            { header: 'Class', cell: (c) => c.classId ?? 'simulated' },
            { header: 'Shape', cell: (c) => `${c.shape.m}×${c.shape.n}×${c.shape.k}, ${c.shape.rounds} rounds on ${c.gpus.length} GPU${c.gpus.length === 1 ? '' : 's'}` },
            { header: 'Seeds', cell: (c) => <ChallengeSeeds challenge={c} /> },
            { header: 'Elapsed / deadline', cell: (c) => `${duration(c.elapsedSeconds)} / ${c.deadlineSeconds === null ? 'no window' : duration(c.deadlineSeconds)}`, className: 'num' },
            { header: 'Rows checked', cell: (c) => c.rowsChecked.length, className: 'num' },
            { header: 'Check', cell: (c) => (c.checkMs === null ? '—' : `${c.checkMs} ms`), className: 'num' },
            { header: 'Reason', cell: (c) => c.reason ?? <span className="muted">none</span> },
          ]}
        />
      )}
    </section>
  );
}

/** The pre-seed and go seed, shortened, each whole in its title and its copy button (the row names the challenge). */
function ChallengeSeeds({ challenge: c }: { challenge: GpuChallenge }) {
  return (
    <ul className="plain-list">
      <li>
        pre <Hash value={c.preSeed} label="pre-seed" />
      </li>
      <li>go {c.goSeed ? <Hash value={c.goSeed} label="go seed" /> : <span className="muted">not sent</span>}</li>
    </ul>
  );
}

/** `datetime-local` gives the reader's local time without a zone: the browser's Date reads it as local. */
function deadlineIso(local: string): string | null {
  if (!local) return null;
  const at = new Date(local);
  return Number.isNaN(at.getTime()) ? null : at.toISOString();
}

function MachineActions({ detail: { machine: m } }: { detail: AdminMachineDetail }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [deadline, setDeadline] = useState('');
  const [reason, setReason] = useState('');
  const path = `${ADMIN_API}/machines/${encodeURIComponent(m.id)}`;
  const refresh = () => {
    setReason('');
    setDeadline('');
    void queryClient.invalidateQueries({ queryKey: ['admin'] });
  };
  // Drain and undrain answer the drain state; cordon's answer is not read (the page refetches).
  const post = (action: 'drain' | 'undrain' | 'cordon' | 'uncordon', body: unknown) => () =>
    api.request({ method: 'POST', path: `${path}/${action}`, body, schema: action === 'drain' || action === 'undrain' ? drainStateSchema : anyAnswer });
  const reasonField = (
    <label className="field">
      <span>Reason (recorded in the audit log)</span>
      <input value={reason} onChange={(e) => setReason(e.target.value)} />
    </label>
  );
  return (
    <section className="card" aria-labelledby="actions-heading">
      <h2 id="actions-heading">Actions</h2>
      <div className="actions-row">
        {m.drainRequested ? (
          <ConfirmButton label="Undrain" title={`Undrain ${m.id}?`} run={post('undrain', {})} onDone={refresh}>
            <p>The machine is offered again and its agent is told the drain is lifted.</p>
          </ConfirmButton>
        ) : (
          <ConfirmButton label="Drain" title={`Drain ${m.id}?`} danger run={post('drain', { deadline: deadlineIso(deadline), reason: reason || null })} onDone={refresh}>
            <p>No new job is assigned to it and its agent gets the `drain` message. Running jobs finish; at the deadline the ones still running are stopped and requeued (not charged).</p>
            <label className="field">
              <span>Deadline (empty: none, running jobs finish on their own)</span>
              <input type="datetime-local" value={deadline} onChange={(e) => setDeadline(e.target.value)} />
            </label>
            {reasonField}
          </ConfirmButton>
        )}
        {m.cordoned ? (
          <ConfirmButton label="Uncordon" title={`Uncordon ${m.id}?`} run={post('uncordon', {})} onDone={refresh}>
            <p>The machine is offered again.</p>
          </ConfirmButton>
        ) : (
          <ConfirmButton label="Cordon" title={`Cordon ${m.id}?`} danger run={post('cordon', { reason: reason || null })} onDone={refresh}>
            <p>No new job is assigned to it. The agent is not told and nothing running is stopped.</p>
            {reasonField}
          </ConfirmButton>
        )}
      </div>
    </section>
  );
}

function History({ id, simulated }: { id: string; simulated: boolean }) {
  const api = useApi();
  const [range, setRange] = useState<(typeof RANGES)[number]>('24h');
  const history = useQuery({
    queryKey: ['admin', 'machine-history', id, range],
    queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/machines/${encodeURIComponent(id)}/history`, query: { range }, schema: machineHistorySchema }),
    placeholderData: keepPreviousData,
    refetchInterval: 60_000,
  });
  return (
    <section aria-labelledby="history-heading">
      <h2 id="history-heading">History</h2>
      <div className="filters">
        <label className="field">
          <span>Range</span>
          <select value={range} onChange={(e) => setRange(e.target.value as (typeof RANGES)[number])}>
            {RANGES.map((r) => (
              <option key={r} value={r}>
                Last {r}
              </option>
            ))}
          </select>
        </label>
      </div>
      <QueryState query={history} loading="Loading the history…" errorTitle="Could not load the machine’s history">
        {(h) => (
          <>
            <MachineHistoryCharts history={h} rangeSeconds={RANGE_SECONDS[range]} simulated={simulated} />
            <h3>Health events</h3>
            {h.healthEvents.length === 0 ? <p className="muted">No health event in this range.</p> : <EventsTable events={h.healthEvents} caption="Health events" />}
          </>
        )}
      </QueryState>
    </section>
  );
}
