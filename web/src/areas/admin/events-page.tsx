import { ADMIN_API, FLEET_EVENT_TYPES, fleetEventListSchema } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { when } from '../../lib/format';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';
import { useUrlFilters } from '../../ui/url-filters';

const PAGE_SIZE = 50;

/** The fleet's events, newest first, filtered by type, machine and farm (held in the URL), paged by cursor. */
export function EventsPage() {
  const { search, params, apply } = useUrlFilters('/events');
  return (
    <Page title="Events">
      <form className="filters" onSubmit={apply} key={search} aria-label="Filter events">
        <label className="field">
          <span>Type</span>
          <select name="type" defaultValue={params.get('type') ?? ''}>
            <option value="">Any type</option>
            {FLEET_EVENT_TYPES.map((type) => (
              <option key={type}>{type}</option>
            ))}
          </select>
        </label>
        <label className="field">
          <span>Machine</span>
          <input name="machine" defaultValue={params.get('machine') ?? ''} />
        </label>
        <label className="field">
          <span>Farm</span>
          <input name="farm" defaultValue={params.get('farm') ?? ''} />
        </label>
        <button type="submit" className="primary">
          Apply
        </button>
      </form>
      <EventList key={search} search={search} />
    </Page>
  );
}

function EventList({ search }: { search: string }) {
  const api = useApi();
  const pages = useCursorPages();
  const { cursor } = pages;
  const events = useQuery({
    queryKey: ['admin', 'events', search, cursor],
    queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/events`, query: { ...Object.fromEntries(new URLSearchParams(search)), limit: PAGE_SIZE, cursor }, schema: fleetEventListSchema }),
    placeholderData: keepPreviousData,
    refetchInterval: 15_000,
  });
  return (
    <QueryState query={events} loading="Loading events…" errorTitle="Could not load the events" isEmpty={(p) => p.data.length === 0} empty={{ title: search ? 'No event matches these filters' : 'No fleet event yet' }}>
      {(page) => (
        <>
          <Table
            caption="Fleet events"
            rows={page.data}
            rowKey={(e) => e.id}
            columns={[
              { header: 'When', cell: (e) => when(e.at) },
              { header: 'Type', cell: (e) => <code>{e.type}</code> },
              { header: 'Machine', cell: (e) => (e.machineId ? <Link href={`/machines/${encodeURIComponent(e.machineId)}`}>{e.machineId}</Link> : '—') },
              { header: 'Job', cell: (e) => e.jobId ?? '—' },
              { header: 'What happened', cell: (e) => e.message },
            ]}
          />
          <Pager pages={pages} nextCursor={page.nextCursor} busy={events.isFetching} />
        </>
      )}
    </QueryState>
  );
}
