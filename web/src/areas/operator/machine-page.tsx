import { marketSchema, OPERATOR_API, type OperatorMachineDetail, operatorMachineDetailSchema } from '@gpufarm/shared';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { anyAnswer, useApi } from '../../lib/api';
import { usd, when } from '../../lib/format';
import { MachineStateBadge } from '../../ui/badges';
import { ConfirmButton } from '../../ui/confirm';
import { GpuTable, gpuProofText, MachineHistoryCharts, RecentJobsTable, StartTimesSection } from '../../ui/machine-parts';
import { Page } from '../../ui/page';
import { Table } from '../../ui/table';
import { QueryState } from '../../ui/query-state';
import { PriceForm } from './price-form';
import { Verdict } from './verdict';

/** One of the farm's machines: the verdict first, then the probe, GPUs, price, drain, history and jobs. */
export function MachinePage({ id }: { id: string }) {
  const api = useApi();
  const machine = useQuery({
    queryKey: ['operator', 'machine', id],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/machines/${encodeURIComponent(id)}`, schema: operatorMachineDetailSchema }),
    refetchInterval: 5_000,
  });
  return (
    <Page title={`Machine ${id}`} actions={<Link href="/machines">All machines</Link>}>
      <QueryState query={machine} loading="Loading the machine…" errorTitle="Could not load this machine">
        {(detail) => <Machine detail={detail} />}
      </QueryState>
    </Page>
  );
}

function Machine({ detail }: { detail: OperatorMachineDetail }) {
  const m = detail.machine;
  return (
    <>
      <section className="card" aria-labelledby="verdict-heading">
        <h2 id="verdict-heading">Earning</h2>
        <Verdict verdict={m.earning} large />
        <GoingPrice detail={detail} />
      </section>
      <section className="card" aria-labelledby="probe-heading">
        <h2 id="probe-heading">GPU probe</h2>
        <p>
          Probe: <strong>{detail.probe.state ?? 'not reported yet'}</strong>
        </p>
        {detail.probe.output ? <pre className="log probe-output">{detail.probe.output}</pre> : <p className="muted">No probe output recorded.</p>}
      </section>
      <section className="card" aria-labelledby="machine-heading">
        <h2 id="machine-heading">Machine</h2>
        <dl className="details">
          <dt>State</dt>
          <dd>
            <MachineStateBadge state={m.state} />
            {m.currentJobId ? ` running job ${m.currentJobId}` : ''}
          </dd>
          <dt>Farm and region</dt>
          <dd>
            {m.farm.slug} · {m.regionKey}
          </dd>
          <dt>Agent / driver / CUDA</dt>
          <dd>
            {m.agentVersion ?? '—'} / {m.driverVersion ?? '—'} / {m.cudaVersion ?? '—'}
          </dd>
          <dt>Benchmark tier</dt>
          <dd>{m.benchmarkTier ?? 'not verified yet'}</dd>
          <dt>GPU proof</dt>
          <dd>{gpuProofText(m.gpuProof)}</dd>
          <dt>Last heartbeat</dt>
          <dd>{when(m.lastHeartbeatAt)}</dd>
        </dl>
        <DrainAction detail={detail} />
      </section>
      <section className="card" aria-labelledby="price-heading">
        <h2 id="price-heading">Price of this machine</h2>
        <PriceForm path={`${OPERATOR_API}/machines/${encodeURIComponent(m.id)}/price`} current={m.pricePerGpuHourMicroUsd} body={(price) => ({ pricePerGpuHour: price })} />
      </section>
      <section aria-labelledby="gpus-heading">
        <h2 id="gpus-heading">GPUs</h2>
        <GpuTable gpus={m.gpus} />
        <NotOfferedGpus gpus={m.notOfferedGpus} />
      </section>
      {detail.history ? (
        <section aria-labelledby="history-heading">
          <h2 id="history-heading">History</h2>
          <p className="muted">The last 24 hours.</p>
          <MachineHistoryCharts history={detail.history} rangeSeconds={86_400} simulated={detail.machine.gpuProof.simulated} />
        </section>
      ) : null}
      <StartTimesSection times={detail.startTimes} />
      <section aria-labelledby="jobs-heading">
        <h2 id="jobs-heading">Recent jobs</h2>
        <RecentJobsTable jobs={detail.recentJobs} />
      </section>
    </>
  );
}

/** "offered at $X/GPU-h; going price for <class> is $Y" for each of the machine's classes. */
function GoingPrice({ detail }: { detail: OperatorMachineDetail }) {
  const api = useApi();
  const m = detail.machine;
  const market = useQuery({
    queryKey: ['operator', 'market', m.farm.slug],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/market`, query: { farm: m.farm.slug }, schema: marketSchema }),
    staleTime: 60_000,
  });
  const classes = [...new Set(m.gpus.map((g) => g.classId))];
  if (!market.data) return null;
  return (
    <ul className="plain-list">
      {classes.map((classId) => {
        const row = market.data.data.find((r) => r.classId === classId);
        return (
          <li key={classId}>
            {m.pricePerGpuHourMicroUsd == null ? 'No price set' : `Offered at ${usd(m.pricePerGpuHourMicroUsd)}/GPU-h`}; going price for {row?.label ?? classId} is{' '}
            {row?.medianPerGpuHourMicroUsd == null ? 'not known (no other offer)' : `${usd(row.medianPerGpuHourMicroUsd)}/GPU-h (median)`}
            {row ? `, ${row.jobsQueued} jobs queued` : ''}.
          </li>
        );
      })}
    </ul>
  );
}

/** The GPUs the agent detected but does not offer, each with its reason: never a bare "0 GPUs". */
function NotOfferedGpus({ gpus }: { gpus: OperatorMachineDetail['machine']['notOfferedGpus'] }) {
  if (gpus.length === 0) return null;
  return (
    <Table
      caption="GPUs not offered"
      rows={gpus}
      rowKey={(g) => String(g.index)}
      columns={[
        { header: 'GPU', cell: (g) => g.index, className: 'num' },
        { header: 'Model', cell: (g) => g.name },
        { header: 'Why it is not offered', cell: (g) => g.reason },
      ]}
    />
  );
}

function DrainAction({ detail }: { detail: OperatorMachineDetail }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [reason, setReason] = useState('');
  const m = detail.machine;
  const path = `${OPERATOR_API}/machines/${encodeURIComponent(m.id)}`;
  const done = () => void queryClient.invalidateQueries({ queryKey: ['operator'] });
  return m.drainRequested ? (
    <ConfirmButton label="Undrain" title={`Undrain ${m.id}?`} run={() => api.request({ method: 'POST', path: `${path}/undrain`, schema: anyAnswer })} onDone={done}>
      <p>The machine is offered again.</p>
    </ConfirmButton>
  ) : (
    <ConfirmButton label="Drain" title={`Drain ${m.id}?`} danger run={() => api.request({ method: 'POST', path: `${path}/drain`, body: reason ? { reason } : {}, schema: anyAnswer })} onDone={done}>
      <p>No new job is assigned to it; a running job finishes. Use it before maintenance; undrain afterwards.</p>
      <label className="field">
        <span>Reason (optional)</span>
        <input value={reason} onChange={(e) => setReason(e.target.value)} />
      </label>
    </ConfirmButton>
  );
}
