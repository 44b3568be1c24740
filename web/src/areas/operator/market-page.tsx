import { type MarketRow, marketSchema, OPERATOR_API } from '@gpufarm/shared';
import { useQuery } from '@tanstack/react-query';
import { useApi } from '../../lib/api';
import { usd } from '../../lib/format';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Table } from '../../ui/table';
import { FarmFilter, useFarmParam } from './farm-filter';

const price = (micro: number | null) => (micro == null ? '—' : usd(micro));

/** Where your price sits against the going prices of the classes you run. */
function compare(row: MarketRow): string {
  const yours = row.yourPricePerGpuHourMicroUsd;
  const median = row.medianPerGpuHourMicroUsd;
  if (yours == null) return 'no price set: not offered';
  if (median == null) return 'no other offer to compare';
  if (yours > median) return `above the median by ${usd(yours - median)}`;
  if (yours < median) return `below the median by ${usd(median - yours)}`;
  return 'at the median';
}

/** Demand and going prices for the classes the farm runs, beside the farm's own price. */
export function MarketPage() {
  const api = useApi();
  const [farm] = useFarmParam();
  const market = useQuery({
    queryKey: ['operator', 'market', farm],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/market`, query: { farm }, schema: marketSchema }),
    refetchInterval: 30_000,
  });
  return (
    <Page title="Market">
      <div className="filters">
        <FarmFilter />
      </div>
      <QueryState query={market} loading="Loading the market…" errorTitle="Could not load the market" isEmpty={(m) => m.data.length === 0} empty={{ title: 'No GPU class to show yet', body: <p>Enroll a machine: its GPU classes appear here with their demand and prices.</p> }}>
        {(m) => (
          <Table
            caption="Demand and prices per GPU class"
            rows={m.data}
            rowKey={(row) => row.classId}
            columns={[
              { header: 'Class', cell: (row) => row.label },
              { header: 'GPUs online / busy', cell: (row) => `${row.gpusOnline} / ${row.gpusBusy}`, className: 'num' },
              { header: 'Jobs queued', cell: (row) => row.jobsQueued, className: 'num' },
              { header: 'Going price (min · median · max)', cell: (row) => `${price(row.minPerGpuHourMicroUsd)} · ${price(row.medianPerGpuHourMicroUsd)} · ${price(row.maxPerGpuHourMicroUsd)}`, className: 'num' },
              { header: 'Your price', cell: (row) => price(row.yourPricePerGpuHourMicroUsd), className: 'num' },
              { header: 'Compared', cell: compare },
            ]}
          />
        )}
      </QueryState>
    </Page>
  );
}
