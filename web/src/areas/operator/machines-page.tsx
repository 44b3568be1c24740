import { OPERATOR_API, operatorMachineListSchema } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { usd, when } from '../../lib/format';
import { MachineStateBadge, VerdictBadge } from '../../ui/badges';
import { gpuProofText } from '../../ui/machine-parts';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';
import { FarmFilter, useFarmParam } from './farm-filter';
import { Verdict } from './verdict';

/** The farm's machines, each with whether it earns and, when not, why and what to do. */
export function MachinesPage() {
  const [farm] = useFarmParam();
  return (
    <Page title="Your machines">
      <div className="filters">
        <FarmFilter />
      </div>
      <MachineList key={farm} farm={farm} />
    </Page>
  );
}

function MachineList({ farm }: { farm: string }) {
  const api = useApi();
  const pages = useCursorPages();
  const { cursor } = pages;
  const machines = useQuery({
    queryKey: ['operator', 'machines', farm, cursor],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/machines`, query: { farm, cursor, limit: 100 }, schema: operatorMachineListSchema }),
    placeholderData: keepPreviousData,
    refetchInterval: 10_000,
  });
  return (
    <QueryState
      query={machines}
      loading="Loading your machines…"
      errorTitle="Could not load your machines"
      isEmpty={(m) => m.data.length === 0}
      empty={{
        title: 'No machine enrolled yet',
        body: (
          <p>
            Create an <Link href="/enrollment">enrollment token</Link> and run the `gf-agent enroll` line it gives on the machine.
          </p>
        ),
      }}
    >
      {(m) => (
        <>
          <p>
            <strong>{m.data.filter((row) => row.earning.earning).length}</strong> of {m.data.length} machines {pages.hasPrevious || m.nextCursor ? 'on this page ' : ''}earning.
          </p>
          <Table
            caption="Your machines"
            rows={m.data}
            rowKey={(row) => row.id}
            columns={[
              { header: 'Machine', cell: (row) => <Link href={`/machines/${encodeURIComponent(row.id)}`}>{row.id}</Link> },
              { header: 'Earning', cell: (row) => <Verdict verdict={row.earning} />, className: 'wide' },
              { header: 'State', cell: (row) => <MachineStateBadge state={row.state} /> },
              {
                header: 'GPUs',
                cell: (row) => (
                  <>
                    <ul className="plain-list">
                      {row.gpus.map((g) => (
                        <li key={g.index}>
                          {g.index}: {g.classId} <VerdictBadge verdict={g.verdict} />
                        </li>
                      ))}
                    </ul>
                    <p className="muted">{gpuProofText(row.gpuProof, { withReason: false })}</p>
                  </>
                ),
              },
              { header: 'Price / GPU-h', cell: (row) => (row.pricePerGpuHourMicroUsd == null ? 'not set' : usd(row.pricePerGpuHourMicroUsd)), className: 'num' },
              { header: 'Farm', cell: (row) => `${row.farm.slug} · ${row.regionKey}` },
              { header: 'Last heartbeat', cell: (row) => when(row.lastHeartbeatAt) },
            ]}
          />
          <Pager pages={pages} nextCursor={m.nextCursor ?? null} busy={machines.isFetching} />
        </>
      )}
    </QueryState>
  );
}
