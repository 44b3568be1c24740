import { type MarketRow, marketSchema, OPERATOR_API, requestedImagesSchema } from '@gpufarm/shared';
import { useQuery } from '@tanstack/react-query';
import { useApi } from '../../lib/api';
import { usd, whenShort } from '../../lib/format';
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

/**
 * The images customers' jobs asked for most this week on the whole market, with how many machines
 * (and how many of yours) hold each: an image to add to an agent's `prepull_images`, so that the
 * matcher prefers that machine for those jobs among equal offers and they start without a pull.
 */
function RequestedImages({ farm }: { farm: string }) {
  const api = useApi();
  const images = useQuery({
    queryKey: ['operator', 'requested-images', farm],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/requested-images`, query: { farm }, schema: requestedImagesSchema }),
    refetchInterval: 60_000,
  });
  return (
    <section aria-labelledby="requested-images-heading">
      <h2 id="requested-images-heading">Most requested images</h2>
      <p>
        Images customers&apos; jobs asked for in the last 7 days. Add one to an agent&apos;s <code>prepull_images</code>: among equally priced machines the matcher prefers the one
        that already holds a job&apos;s image, so your machine gets those jobs first and they start without a pull.
      </p>
      <QueryState query={images} loading="Loading the requested images…" errorTitle="Could not load the requested images" isEmpty={(r) => r.data.length === 0} empty={{ title: 'No job asked for an image this week', body: <p>Images appear here once customers fund jobs.</p> }}>
        {(r) => (
          <Table
            caption="Most requested images, last 7 days"
            rows={r.data}
            rowKey={(row) => row.image}
            columns={[
              { header: 'Image', cell: (row) => <code className="hash-full">{row.image}</code> },
              { header: 'Jobs', cell: (row) => row.jobs, className: 'num' },
              { header: 'Last asked', cell: (row) => whenShort(row.lastRequestedAt) },
              { header: 'Machines holding it', cell: (row) => row.machinesHolding, className: 'num' },
              { header: 'Yours holding it', cell: (row) => row.yourMachinesHolding, className: 'num' },
            ]}
          />
        )}
      </QueryState>
    </section>
  );
}

/** Demand and going prices for the classes the farm runs, beside the farm's own price, and the images jobs ask for. */
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
      <RequestedImages farm={farm} />
    </Page>
  );
}
