import { ADMIN_API, adminMachineListSchema, GPU_HEALTH_VERDICTS, MACHINE_STATES } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { duration, percent } from '../../lib/format';
import { MachineStateBadge, VerdictBadge } from '../../ui/badges';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';
import { useUrlFilters } from '../../ui/url-filters';

const PAGE_SIZE = 50;

/** The filters the server applies, in the order of the form; the URL's query holds them. */
const TEXT_FILTERS = [
  { name: 'q', label: 'Machine id' },
  { name: 'farm', label: 'Farm' },
  { name: 'region', label: 'Region' },
  { name: 'class', label: 'GPU class' },
  { name: 'agentVersion', label: 'Agent version' },
  { name: 'driver', label: 'Driver' },
] as const;

/** Every machine of every farm, filtered and sorted by the server, paged by cursor. */
export function MachinesPage() {
  const { search, params, apply } = useUrlFilters('/machines');
  return (
    <Page title="Machines">
      <form className="filters" onSubmit={apply} key={search} aria-label="Filter machines">
        {TEXT_FILTERS.map((f) => (
          <label key={f.name} className="field">
            <span>{f.label}</span>
            <input name={f.name} defaultValue={params.get(f.name) ?? ''} />
          </label>
        ))}
        <label className="field">
          <span>Verdict</span>
          <select name="verdict" defaultValue={params.get('verdict') ?? ''}>
            <option value="">Any verdict</option>
            {GPU_HEALTH_VERDICTS.map((v) => (
              <option key={v}>{v}</option>
            ))}
          </select>
        </label>
        <label className="field">
          <span>State</span>
          <select name="state" defaultValue={params.get('state') ?? ''}>
            <option value="">Any state</option>
            {MACHINE_STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label className="field">
          <span>Sort by</span>
          <select name="sort" defaultValue={params.get('sort') ?? 'heartbeat_age'}>
            <option value="heartbeat_age">Heartbeat age</option>
            <option value="utilization">Utilization</option>
            <option value="failures">Failures (7 days)</option>
          </select>
        </label>
        <label className="field">
          <span>Order</span>
          <select name="order" defaultValue={params.get('order') ?? 'desc'}>
            <option value="desc">Highest first</option>
            <option value="asc">Lowest first</option>
          </select>
        </label>
        <button type="submit" className="primary">
          Apply
        </button>
        {search ? (
          <Link href="/machines" className="button-link">
            Clear filters
          </Link>
        ) : null}
      </form>
      <MachineList key={search} search={search} />
    </Page>
  );
}

function MachineList({ search }: { search: string }) {
  const api = useApi();
  const pages = useCursorPages();
  const { cursor } = pages;
  const query = Object.fromEntries(new URLSearchParams(search));
  const machines = useQuery({
    queryKey: ['admin', 'machines', search, cursor],
    queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/machines`, query: { ...query, limit: PAGE_SIZE, cursor }, schema: adminMachineListSchema }),
    placeholderData: keepPreviousData,
    refetchInterval: 15_000,
  });
  return (
    <QueryState
      query={machines}
      loading="Loading machines…"
      errorTitle="Could not load the machines"
      isEmpty={(page) => page.data.length === 0}
      empty={{ title: search ? 'No machine matches these filters' : 'No machines enrolled yet', body: search ? <p>Change or clear the filters.</p> : <p>Machines appear here once a farm enrolls one with `gf-agent enroll`.</p> }}
    >
      {(page) => (
        <>
          {page.total != null ? <p className="muted">{page.total} machines match.</p> : null}
          <Table
            caption="Machines"
            rows={page.data}
            rowKey={(m) => m.id}
            columns={[
              { header: 'Machine', cell: (m) => <Link href={`/machines/${encodeURIComponent(m.id)}`}>{m.id}</Link> },
              { header: 'Farm', cell: (m) => m.farm.slug, className: 'nowrap' },
              { header: 'Region', cell: (m) => m.regionKey, className: 'nowrap' },
              { header: 'State', cell: (m) => <MachineStateBadge state={m.state} /> },
              {
                header: 'Health',
                cell: (m) => (
                  <>
                    <VerdictBadge verdict={m.verdict} /> {m.verdictReasons.length ? <span className="muted">{m.verdictReasons.join('; ')}</span> : null}
                  </>
                ),
              },
              { header: 'GPUs', cell: (m) => `${m.gpuCount} × ${m.classIds.join(', ') || '—'}`, className: 'nowrap' },
              { header: 'Agent', cell: (m) => m.agentVersion ?? '—' },
              { header: 'Driver', cell: (m) => m.driverVersion ?? '—' },
              { header: 'Heartbeat age', cell: (m) => duration(m.heartbeatAgeSeconds), className: 'num' },
              { header: 'Utilization', cell: (m) => percent(m.utilizationPercent), className: 'num' },
              { header: 'Failures (7 d)', cell: (m) => m.failures7d, className: 'num' },
            ]}
          />
          <Pager pages={pages} nextCursor={page.nextCursor} busy={machines.isFetching} />
        </>
      )}
    </QueryState>
  );
}
