import type { CapacityQuery } from '@gpufarm/client/browser';
import { parseUsdToMicroUsd, formatMicroUsd, type CapacityOffer } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useApi } from '../../lib/api';
import { bytes, usd, when } from '../../lib/format';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';

type Sort = NonNullable<CapacityQuery['sort']>;
const SORTS: { value: Sort; label: string }[] = [
  { value: 'available', label: 'Most available' },
  { value: 'price_asc', label: 'Price, lowest first' },
  { value: 'price_desc', label: 'Price, highest first' },
  { value: 'vram', label: 'Most VRAM' },
  { value: 'uptime', label: 'Best uptime' },
  { value: 'count', label: 'Most GPUs' },
];

interface Filters {
  model: string;
  region: string;
  minVramGb: string;
  maxPrice: string;
  provenOnly: boolean;
  sort: Sort;
}

/** The filters as the API's query; a field that does not parse is reported instead of sent. */
function toQuery(f: Filters): { query: CapacityQuery; problem: string | null } {
  const query: CapacityQuery = { sort: f.sort, limit: 50 };
  if (f.provenOnly) query.proven = true;
  if (f.model.trim()) query.model = f.model.trim();
  if (f.region.trim()) query.region = f.region.trim();
  if (f.minVramGb.trim()) {
    if (!/^\d{1,4}$/.test(f.minVramGb.trim())) return { query, problem: 'Min VRAM must be a whole number of GB.' };
    query.minVram = Number(f.minVramGb.trim());
  }
  if (f.maxPrice.trim()) {
    const parsed = parseUsdToMicroUsd(f.maxPrice.trim());
    if (!parsed.ok) return { query, problem: 'Max price must be a USD amount such as 2.50.' };
    query.maxPrice = formatMicroUsd(parsed.microUsd);
  }
  return { query, problem: null };
}

/**
 * Whether the offer's machines proved their GPUs with a GPU challenge: "Proven" with the oldest
 * proof among them, else "Simulated" (simulated GPUs prove nothing) or "Not proven".
 */
function ProofBadge({ offer }: { offer: Pick<CapacityOffer, 'proof' | 'simulated'> }) {
  if (offer.proof.proven) {
    return (
      <>
        <span className="badge badge-ok">Proven</span> <span className="muted">{when(offer.proof.provenAt)}</span>
      </>
    );
  }
  return offer.simulated ? <span className="badge badge-off">Simulated</span> : <span className="badge badge-wait">Not proven</span>;
}

/** The public capacity listing (no sign-in): filter by model, region, VRAM, price and proven GPUs; sort. */
export function CapacityPage() {
  const { gf } = useApi();
  const [draft, setDraft] = useState<Filters>({ model: '', region: '', minVramGb: '', maxPrice: '', provenOnly: false, sort: 'available' });
  const [applied, setApplied] = useState<CapacityQuery>({ sort: 'available', limit: 50 });
  const [problem, setProblem] = useState<string | null>(null);
  const pages = useCursorPages();
  const { cursor } = pages;
  const offers = useQuery({ queryKey: ['capacity', applied, cursor], queryFn: () => gf.capacity.list({ ...applied, cursor }), placeholderData: keepPreviousData });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const { query, problem: found } = toQuery(draft);
    setProblem(found);
    if (found) return;
    setApplied(query);
    pages.reset();
  };
  const field = (name: 'model' | 'region' | 'minVramGb' | 'maxPrice') => ({ value: draft[name], onChange: (e: { target: { value: string } }) => setDraft((d) => ({ ...d, [name]: e.target.value })) });
  return (
    <Page title="Capacity">
      <form className="filters card" onSubmit={submit} aria-label="Capacity filters">
        <label className="field">
          <span>Model</span>
          <input {...field('model')} placeholder="e.g. RTX 4090" />
        </label>
        <label className="field">
          <span>Region</span>
          <input {...field('region')} placeholder="e.g. europe-west" />
        </label>
        <label className="field">
          <span>Min VRAM (GB)</span>
          <input {...field('minVramGb')} inputMode="numeric" />
        </label>
        <label className="field">
          <span>Max price (USD per GPU-hour)</span>
          <input {...field('maxPrice')} inputMode="decimal" />
        </label>
        <label className="check">
          <input type="checkbox" checked={draft.provenOnly} onChange={(e) => setDraft((d) => ({ ...d, provenOnly: e.target.checked }))} />
          Proven GPUs only
        </label>
        <label className="field">
          <span>Sort</span>
          <select value={draft.sort} onChange={(e) => setDraft((d) => ({ ...d, sort: e.target.value as Sort }))}>
            {SORTS.map((s) => (
              <option key={s.value} value={s.value}>
                {s.label}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" className="primary">
          Apply filters
        </button>
        {problem ? (
          <p className="tx tx-failed" role="alert">
            {problem}
          </p>
        ) : null}
      </form>
      <QueryState
        query={offers}
        loading="Loading capacity…"
        errorTitle="Could not load the capacity listing"
        isEmpty={(page) => page.data.length === 0}
        empty={{ title: 'No offers match', body: <p>Loosen the filters (a lower minimum VRAM, a higher maximum price, not only proven GPUs) or clear them.</p> }}
      >
        {(page) => (
          <>
            <Table
              caption="Capacity offers"
              rows={page.data}
              rowKey={(o) => o.id}
              columns={[
                { header: 'GPU', cell: (o) => o.gpu.label },
                { header: 'VRAM', cell: (o) => bytes(o.gpu.vramBytes), className: 'num' },
                { header: 'Farm', cell: (o) => o.farm.name },
                { header: 'Region', cell: (o) => o.region.label },
                { header: 'Available', cell: (o) => `${o.available} of ${o.count}`, className: 'num' },
                { header: 'Price per GPU-hour', cell: (o) => usd(o.price.perGpuHourMicroUsd), className: 'num' },
                { header: 'Tier', cell: (o) => o.benchmarkTier },
                { header: 'Uptime', cell: (o) => `${o.uptimePct}%`, className: 'num' },
                { header: 'GPUs proven', cell: (o) => <ProofBadge offer={o} /> },
              ]}
            />
            <Pager pages={pages} nextCursor={page.nextCursor} busy={offers.isFetching} />
          </>
        )}
      </QueryState>
    </Page>
  );
}
