import { billingSums, type BillingEntry, type BillingEntryType, type BillingSums } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { usd, when } from '../../lib/format';
import { DASHBOARD_API } from '../../lib/session-api';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Hash } from '../../ui/hash';
import { Pager, Table, useCursorPages } from '../../ui/table';
import { WithdrawalsCard } from '../../ui/withdrawals-card';

const PAGE_SIZE = 50;
// The totals read every entry; an account past this many sees the newest ones summed and is told so.
const TOTALS_MAX_ENTRIES = 5_000;

interface MonthTotals {
  month: string;
  sums: BillingSums;
}

/** Sums per calendar month (UTC) of the entries made in it, in micro-USD as bigint: never a float. */
export function monthlyTotals(entries: readonly BillingEntry[]): MonthTotals[] {
  const months = new Map<string, BillingEntry[]>();
  for (const entry of entries) {
    const month = entry.createdAt.slice(0, 7);
    const inMonth = months.get(month);
    if (inMonth) inMonth.push(entry);
    else months.set(month, [entry]);
  }
  return [...months].sort(([a], [b]) => b.localeCompare(a)).map(([month, inMonth]) => ({ month, sums: billingSums(inMonth) }));
}

/** What each entry type means to the customer, as the entries table says it. */
export const ENTRY_WORDS: Record<BillingEntryType, string> = {
  funded: 'Deposit into escrow',
  charge: 'Charge (compute + fee)',
  credit: 'Credit (dispute outcome)',
  release: 'Returned to wallet',
  refund: 'Refund of the deposit',
};

/** Billing: totals per month and the entries, newest first. */
export function BillingPage() {
  const { gf } = useApi();
  const pages = useCursorPages();
  const { cursor } = pages;
  const page = useQuery({ queryKey: ['billing', cursor], queryFn: () => gf.billing.list({ limit: PAGE_SIZE, cursor }), placeholderData: keepPreviousData });
  const totals = useQuery({
    queryKey: ['billing-totals'],
    queryFn: async () => {
      const entries: BillingEntry[] = [];
      for await (const entry of gf.billing.listAll({ limit: 100 })) {
        entries.push(entry);
        if (entries.length >= TOTALS_MAX_ENTRIES) return { months: monthlyTotals(entries), held: null, capped: true };
      }
      return { months: monthlyTotals(entries), held: billingSums(entries).held, capped: false };
    },
  });
  return (
    <Page title="Billing">
      <WithdrawalsCard
        queryKey={['withdrawals']}
        path={`${DASHBOARD_API}/withdrawals`}
        intro="The escrow could not send these refunds to your wallet when the jobs were released. They wait in the escrow until your wallet withdraws them."
        caption="Refunds waiting for withdrawal"
        refresh={['withdrawals']}
      />
      <section aria-labelledby="totals-heading">
        <h2 id="totals-heading">Totals per month</h2>
        <QueryState
          query={totals}
          loading="Adding up your entries…"
          errorTitle="Could not add up your billing"
          isEmpty={(t) => t.months.length === 0}
          empty={{ title: 'Nothing billed yet', body: <p>Entries appear when a job is funded, charged, paid out or refunded.</p> }}
        >
          {(t) => (
            <>
              <Table
                caption="Totals per month"
                rows={t.months}
                rowKey={(m) => m.month}
                columns={[
                  { header: 'Month', cell: (m) => m.month },
                  { header: 'Funded', cell: (m) => usd(m.sums.funded), className: 'num' },
                  { header: 'Charged', cell: (m) => usd(m.sums.charged), className: 'num' },
                  { header: 'Returned', cell: (m) => usd(m.sums.returned), className: 'num' },
                ]}
              />
              <p className="muted">
                Each deposit is either charged or returned to your wallet: the unspent part when the job is paid out, the whole of it when the job is refunded or a dispute goes your way.
                {t.held !== null ? (t.held > 0n ? ` ${usd(t.held)} is still in escrow: jobs not paid out yet and refunds not claimed yet.` : ' Nothing is held in escrow now.') : null}
              </p>
              {t.capped ? <p className="muted">Totals cover your newest {TOTALS_MAX_ENTRIES} entries.</p> : null}
            </>
          )}
        </QueryState>
      </section>
      <section aria-labelledby="entries-heading">
        <h2 id="entries-heading">Entries</h2>
        <QueryState query={page} loading="Loading entries…" errorTitle="Could not load billing entries" isEmpty={(p) => p.data.length === 0} empty={{ title: 'No billing entries' }}>
          {(p) => (
            <>
              <Table
                caption="Billing entries"
                rows={p.data}
                rowKey={(e) => e.id}
                columns={[
                  { header: 'Date', cell: (e) => when(e.createdAt) },
                  { header: 'Type', cell: (e) => ENTRY_WORDS[e.type] },
                  { header: 'Job', cell: (e) => (e.jobId ? <Link href={`/jobs/${encodeURIComponent(e.jobId)}`}>{e.jobId}</Link> : '—') },
                  { header: 'Amount', cell: (e) => usd(e.amountMicroUsd), className: 'num' },
                  { header: 'Transaction', cell: (e) => (e.txHash ? <Hash value={e.txHash} label="transaction hash" /> : '—') },
                ]}
              />
              <Pager pages={pages} nextCursor={p.nextCursor} busy={page.isFetching} />
            </>
          )}
        </QueryState>
      </section>
    </Page>
  );
}

