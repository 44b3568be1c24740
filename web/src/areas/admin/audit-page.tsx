import { ADMIN_API, auditListSchema } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useApi } from '../../lib/api';
import { when } from '../../lib/format';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';

/** Who did what to which object, and when: every admin and operator action, newest first. */
export function AuditPage() {
  const api = useApi();
  const pages = useCursorPages();
  const { cursor } = pages;
  const audit = useQuery({
    queryKey: ['admin', 'audit', cursor],
    queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/audit`, query: { limit: 50, cursor }, schema: auditListSchema }),
    placeholderData: keepPreviousData,
  });
  return (
    <Page title="Audit log">
      <QueryState query={audit} loading="Loading the audit log…" errorTitle="Could not load the audit log" isEmpty={(p) => p.data.length === 0} empty={{ title: 'No action recorded yet' }}>
        {(page) => (
          <>
            <Table
              caption="Audit log"
              rows={page.data}
              rowKey={(a) => a.id}
              columns={[
                { header: 'When', cell: (a) => when(a.at) },
                {
                  header: 'Who',
                  cell: (a) => (
                    <>
                      <span className="muted">{a.actor.kind.replace('_', ' ')}</span> <code>{a.actor.id}</code>
                    </>
                  ),
                },
                { header: 'Action', cell: (a) => <code>{a.action}</code> },
                {
                  header: 'Target',
                  cell: (a) => (
                    <>
                      {a.targetType} <code>{a.targetId}</code>
                    </>
                  ),
                },
                { header: 'Details', cell: (a) => (a.details && Object.keys(a.details).length ? <code>{JSON.stringify(a.details)}</code> : '—') },
              ]}
            />
            <Pager pages={pages} nextCursor={page.nextCursor} busy={audit.isFetching} />
          </>
        )}
      </QueryState>
    </Page>
  );
}
