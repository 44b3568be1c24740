import { ADMIN_API, type AdminFarm, adminFarmListSchema } from '@gpufarm/shared';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { anyAnswer, useApi } from '../../lib/api';
import { ConfirmButton } from '../../ui/confirm';
import { Hash } from '../../ui/hash';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Table } from '../../ui/table';

/** The farms, with quarantine: none of a quarantined farm's machines is offered; running jobs finish. */
export function FarmsPage() {
  const api = useApi();
  const farms = useQuery({ queryKey: ['admin', 'farms'], queryFn: () => api.request({ method: 'GET', path: `${ADMIN_API}/farms`, schema: adminFarmListSchema }) });
  return (
    <Page title="Farms">
      <QueryState query={farms} loading="Loading farms…" errorTitle="Could not load the farms" isEmpty={(f) => f.data.length === 0} empty={{ title: 'No farm yet' }}>
        {(f) => (
          <Table
            caption="Farms"
            rows={f.data}
            rowKey={(farm) => farm.id}
            columns={[
              { header: 'Farm', cell: (farm) => `${farm.name} (${farm.slug})` },
              { header: 'Status', cell: (farm) => <span className={`badge ${farm.status === 'active' ? 'badge-ok' : 'badge-bad'}`}>{farm.status}</span> },
              { header: 'Machines', cell: (farm) => <Link href={`/machines?farm=${encodeURIComponent(farm.slug)}`}>{farm.machines}</Link>, className: 'num' },
              { header: 'Payout wallet', cell: (farm) => (farm.payoutAddress ? <Hash value={farm.payoutAddress} label="payout wallet" /> : '—') },
              { header: 'Actions', cell: (farm) => <QuarantineAction farm={farm} /> },
            ]}
          />
        )}
      </QueryState>
    </Page>
  );
}

function QuarantineAction({ farm }: { farm: AdminFarm }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [reason, setReason] = useState('');
  const path = `${ADMIN_API}/farms/${encodeURIComponent(farm.id)}`;
  const done = () => void queryClient.invalidateQueries({ queryKey: ['admin'] });
  if (farm.status === 'quarantined') {
    return (
      <ConfirmButton label="Unquarantine" title={`Lift the quarantine of ${farm.slug}?`} run={() => api.request({ method: 'POST', path: `${path}/unquarantine`, schema: anyAnswer })} onDone={done}>
        <p>Its machines are offered again.</p>
      </ConfirmButton>
    );
  }
  return (
    <ConfirmButton label="Quarantine" title={`Quarantine ${farm.slug}?`} danger run={() => api.request({ method: 'POST', path: `${path}/quarantine`, body: { reason: reason || null }, schema: anyAnswer })} onDone={done}>
      <p>None of its {farm.machines} machines is offered from now on; jobs running there finish.</p>
      <label className="field">
        <span>Reason (recorded in the audit log)</span>
        <input value={reason} onChange={(e) => setReason(e.target.value)} />
      </label>
    </ConfirmButton>
  );
}
