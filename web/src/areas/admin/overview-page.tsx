import { ADMIN_API, type FleetOverview, fleetOverviewSchema, MACHINE_STATES } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { useApi } from '../../lib/api';
import { basisPoints, duration } from '../../lib/format';
import { TimeChart } from '../../ui/chart';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Table } from '../../ui/table';

const count = (v: number) => String(Math.round(v));

/** The fleet at a glance: machines by state, GPUs free and busy, the queue, outcomes per farm, and their history. */
export function OverviewPage() {
  const api = useApi();
  const [range, setRange] = useState<'24h' | '7d'>('24h');
  const overview = useQuery({
    queryKey: ['admin', 'overview', range],
    queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/fleet/overview`, query: { window: range }, schema: fleetOverviewSchema }),
    placeholderData: keepPreviousData,
    refetchInterval: 30_000,
  });
  return (
    <Page title="Fleet overview">
      <div className="filters">
        <label className="field">
          <span>Window</span>
          <select value={range} onChange={(e) => setRange(e.target.value as '24h' | '7d')}>
            <option value="24h">Last 24 hours</option>
            <option value="7d">Last 7 days</option>
          </select>
        </label>
      </div>
      <QueryState query={overview} loading="Loading the fleet…" errorTitle="Could not load the fleet overview">
        {(o) => <Overview o={o} range={range} />}
      </QueryState>
    </Page>
  );
}

const WINDOW_SECONDS = { '24h': 86_400, '7d': 7 * 86_400 } as const;

function Overview({ o, range }: { o: FleetOverview; range: '24h' | '7d' }) {
  // The window ends at the latest point, or now when there is none yet.
  const to = o.series.t.at(-1) ?? Math.floor(Date.now() / 1000);
  const span = { from: to - WINDOW_SECONDS[range], to };
  const machineSeries = useMemo(() => [{ label: 'Machines online', values: o.series.machinesOnline }], [o]);
  const gpuSeries = useMemo(() => [{ label: 'GPUs busy', values: o.series.gpusBusy }], [o]);
  const jobSeries = useMemo(
    () => [
      { label: 'Jobs queued', values: o.series.jobsQueued },
      { label: 'Jobs running', values: o.series.jobsRunning },
    ],
    [o],
  );
  return (
    <>
      <section aria-labelledby="machines-heading">
        <h2 id="machines-heading">Machines</h2>
        <dl className="stats">
          {MACHINE_STATES.map((state) => (
            <div key={state} className="stat">
              <dt>{state[0]!.toUpperCase() + state.slice(1)}</dt>
              <dd>{o.machines[state]}</dd>
            </div>
          ))}
        </dl>
      </section>
      <section aria-labelledby="queue-heading">
        <h2 id="queue-heading">Jobs and matching</h2>
        <dl className="stats">
          <div className="stat">
            <dt>Queued</dt>
            <dd>{o.jobs.queued}</dd>
          </div>
          <div className="stat">
            <dt>Running</dt>
            <dd>{o.jobs.running}</dd>
          </div>
          <div className="stat">
            <dt>Queue wait p50 / p95</dt>
            <dd>
              {duration(o.queueWaitSeconds.p50)} / {duration(o.queueWaitSeconds.p95)}
            </dd>
          </div>
          <div className="stat">
            <dt>Matching p50 / p95</dt>
            <dd>
              {o.matchingMs.p50 == null ? '—' : `${Math.round(o.matchingMs.p50)} ms`} / {o.matchingMs.p95 == null ? '—' : `${Math.round(o.matchingMs.p95)} ms`}
            </dd>
          </div>
        </dl>
        {o.matchingMs.p50 == null ? <p className="muted">Matching times without samples here are in the control plane’s metrics (<code>/metrics</code>).</p> : null}
      </section>
      <section aria-labelledby="history-heading">
        <h2 id="history-heading">History ({range}, one point per {duration(o.series.resolutionSeconds)})</h2>
        <div className="charts">
          <TimeChart title="Machines online" t={o.series.t} series={machineSeries} format={count} span={span} />
          <TimeChart title="GPUs busy" t={o.series.t} series={gpuSeries} format={count} span={span} />
          <TimeChart title="Jobs queued and running" t={o.series.t} series={jobSeries} format={count} span={span} />
        </div>
      </section>
      <section aria-labelledby="gpus-heading">
        <h2 id="gpus-heading">GPUs by class and region</h2>
        {o.gpus.length === 0 ? (
          <p className="muted">No GPUs enrolled yet.</p>
        ) : (
          <Table
            caption="GPUs by class and region"
            rows={o.gpus}
            rowKey={(g) => `${g.classId}/${g.regionKey}`}
            columns={[
              { header: 'Class', cell: (g) => g.classId },
              { header: 'Region', cell: (g) => g.regionKey },
              { header: 'Free', cell: (g) => g.free, className: 'num' },
              { header: 'Busy', cell: (g) => g.busy, className: 'num' },
            ]}
          />
        )}
      </section>
      <section aria-labelledby="outcomes-heading">
        <h2 id="outcomes-heading">Job outcomes per farm ({range})</h2>
        {o.outcomesByFarm.length === 0 ? (
          <p className="muted">No job ended in this window.</p>
        ) : (
          <Table
            caption={`Job outcomes per farm, ${range}`}
            rows={o.outcomesByFarm}
            rowKey={(f) => f.farmId}
            columns={[
              { header: 'Farm', cell: (f) => f.farmSlug },
              { header: 'Completed', cell: (f) => f.completed, className: 'num' },
              { header: 'Failed', cell: (f) => f.failed, className: 'num' },
              { header: 'Timed out', cell: (f) => f.timedOut, className: 'num' },
              { header: 'Canceled', cell: (f) => f.canceled, className: 'num' },
              { header: 'Failure rate', cell: (f) => basisPoints(f.failureRateBps), className: 'num' },
            ]}
          />
        )}
      </section>
    </>
  );
}
