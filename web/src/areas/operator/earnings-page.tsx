import { type EARNING_STATES, type Earnings, earningsSchema, OPERATOR_API } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useApi } from '../../lib/api';
import { Link } from 'wouter';
import { tokenAmount, when, whenShort } from '../../lib/format';
import { Hash } from '../../ui/hash';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';
import { WithdrawalsCard } from '../../ui/withdrawals-card';
import { FarmFilter, useFarmParam } from './farm-filter';

type GroupBy = 'job' | 'machine' | 'day';
type Row = Earnings['data'][number];

const STATE_LABEL: Record<(typeof EARNING_STATES)[number], string> = {
  pending: 'pending',
  released: 'released',
  disputed: 'disputed',
  refunded: 'refunded',
  waiting_withdrawal: 'waiting for withdrawal',
};
export const stateOf = (r: Pick<Row, 'state'>) => (r.state ? STATE_LABEL[r.state] : '—');

/** `from`/`to` as the server wants them: ISO times of the reader's local day bounds; empty means open. */
function dayBound(date: string, end: boolean): string | undefined {
  if (!date) return undefined;
  const at = new Date(`${date}T00:00:00`);
  if (end) at.setDate(at.getDate() + 1);
  return at.toISOString();
}

/** What the farm earned from the escrow: pending in the challenge window, released (paid), per job, machine or day; CSV for the books. */
export function EarningsPage() {
  const [farm] = useFarmParam();
  const [groupBy, setGroupBy] = useState<GroupBy>('job');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const query = { farm, groupBy, from: dayBound(from, false), to: dayBound(to, true) };
  const csv = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''));
  return (
    <Page title="Earnings" actions={<a href={`${OPERATOR_API}/earnings.csv?${csv}`} download="gpufarm-earnings.csv" className="button-link">Download CSV</a>}>
      <div className="filters">
        <FarmFilter />
        <label className="field">
          <span>Per</span>
          <select value={groupBy} onChange={(e) => setGroupBy(e.target.value as GroupBy)}>
            <option value="job">Job</option>
            <option value="machine">Machine</option>
            <option value="day">Day</option>
          </select>
        </label>
        <label className="field">
          <span>From</span>
          <input type="date" value={from} onChange={(e) => setFrom(e.target.value)} />
        </label>
        <label className="field">
          <span>To</span>
          <input type="date" value={to} onChange={(e) => setTo(e.target.value)} />
        </label>
      </div>
      <WithdrawalsCard
        queryKey={['operator', 'withdrawals', farm]}
        path={`${OPERATOR_API}/withdrawals`}
        query={{ farm }}
        intro="The escrow released these payouts but could not send them to the payout wallet. They wait in the escrow until that wallet withdraws them."
        caption="Payouts waiting for withdrawal"
        refresh={['operator']}
      />
      <EarningsList key={JSON.stringify(query)} query={query} />
    </Page>
  );
}

function EarningsList({ query }: { query: { farm: string; groupBy: GroupBy; from?: string; to?: string } }) {
  const api = useApi();
  const pages = useCursorPages();
  const { cursor } = pages;
  const { groupBy } = query;
  const earnings = useQuery({
    queryKey: ['operator', 'earnings', query, cursor],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/earnings`, query: { ...query, cursor }, schema: earningsSchema }),
    placeholderData: keepPreviousData,
    refetchInterval: 30_000,
  });
  return (
    <QueryState query={earnings} loading="Loading earnings…" errorTitle="Could not load your earnings">
      {(e) => (
        <>
          <section aria-labelledby="totals-heading">
            <h2 id="totals-heading">Totals</h2>
            {e.totals.length === 0 ? (
              <p className="muted">Nothing earned in this range yet.</p>
            ) : (
              <Table
                caption="Totals per token"
                rows={e.totals}
                rowKey={(t) => t.token}
                columns={[
                  { header: 'Token', cell: (t) => t.symbol },
                  { header: 'Pending (challenge window)', cell: (t) => tokenAmount(t.pending, t.decimals, t.symbol), className: 'num' },
                  { header: 'Released (paid to the payout wallet)', cell: (t) => tokenAmount(t.released, t.decimals, t.symbol), className: 'num' },
                  { header: 'Waiting for withdrawal', cell: (t) => tokenAmount(t.waitingWithdrawal, t.decimals, t.symbol), className: 'num' },
                ]}
              />
            )}
          </section>
          <section aria-labelledby="rows-heading">
            <h2 id="rows-heading">Per {groupBy}</h2>
            {e.data.length === 0 ? <p className="muted">No entry in this range.</p> : <Table caption={`Earnings per ${groupBy}`} rows={e.data} rowKey={rowKey(groupBy)} columns={columnsFor(groupBy)} />}
            <Pager pages={pages} nextCursor={e.nextCursor ?? null} busy={earnings.isFetching} />
          </section>
        </>
      )}
    </QueryState>
  );
}

const rowKey = (groupBy: GroupBy) => (row: Row) => `${row[groupBy === 'job' ? 'jobId' : groupBy === 'machine' ? 'machineId' : 'day'] ?? ''}/${row.token}/${row.state ?? ''}`;

/** The machine's page, where its recent jobs are listed. */
const machineCell = (r: Row) => (r.machineId ? <Link href={`/machines/${encodeURIComponent(r.machineId)}`}>{shortId(r.machineId)}</Link> : '—');
const shortId = (id: string) => (id.length <= 16 ? id : `${id.slice(0, 9)}…${id.slice(-4)}`);

function columnsFor(groupBy: GroupBy) {
  const amount = { header: 'Amount', cell: (r: Row) => tokenAmount(r.amount, r.decimals, r.symbol), className: 'num' };
  if (groupBy === 'day') return [{ header: 'Day', cell: (r: Row) => r.day ?? '—' }, amount, { header: 'State', cell: stateOf }];
  if (groupBy === 'machine') return [{ header: 'Machine', cell: machineCell }, amount, { header: 'State', cell: stateOf }];
  // Ids shortened with their copy button and dates to the minute: at 1280 px every column shows.
  return [
    {
      header: 'Job',
      cell: (r: Row) =>
        r.jobId ? (
          <Link href={`/jobs/${encodeURIComponent(r.jobId)}`} title={r.jobId}>
            <span aria-hidden="true">{shortId(r.jobId)}</span>
            <span className="visually-hidden">{r.jobId}</span>
          </Link>
        ) : (
          '—'
        ),
    },
    { header: 'Machine', cell: machineCell },
    amount,
    { header: 'State', cell: stateOf },
    { header: 'Completed', cell: (r: Row) => <time dateTime={r.completedAt ?? undefined} title={when(r.completedAt)}>{whenShort(r.completedAt)}</time> },
    { header: 'Challenge ends', cell: (r: Row) => <time dateTime={r.challengeEndsAt ?? undefined} title={when(r.challengeEndsAt)}>{whenShort(r.challengeEndsAt)}</time> },
    { header: 'Released', cell: (r: Row) => (r.releaseTxHash ? <Hash value={r.releaseTxHash} label="release transaction" /> : when(r.releasedAt)) },
  ];
}
