import { marketSchema, OPERATOR_API } from '@gpufarm/shared';
import { useQuery } from '@tanstack/react-query';
import { useApi } from '../../lib/api';
import { usd } from '../../lib/format';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { FarmFilter, useFarmParam, useOperatorFarms } from './farm-filter';
import { PriceForm } from './price-form';

/** The farm's price per GPU class: saving one sets it on every machine of that class in the farm. */
export function PricesPage() {
  const api = useApi();
  const farms = useOperatorFarms();
  const [picked] = useFarmParam();
  const farm = picked || farms[0]?.slug || '';
  const market = useQuery({
    queryKey: ['operator', 'market', farm],
    queryFn: () => api.request({ method: 'GET', path: `${OPERATOR_API}/market`, query: { farm }, schema: marketSchema }),
  });
  return (
    <Page title="Prices">
      <div className="filters">
        <FarmFilter allowAll={false} />
      </div>
      <p className="muted">A class’s price applies to every machine of farm {farm} with that class. A machine’s own page can set a different price for it.</p>
      <QueryState query={market} loading="Loading your classes…" errorTitle="Could not load your GPU classes" isEmpty={(m) => m.data.length === 0} empty={{ title: 'No GPU class yet', body: <p>Enroll a machine first; its classes appear here.</p> }}>
        {(m) =>
          m.data.map((row) => (
            <section key={`${farm}/${row.classId}`} className="card" aria-labelledby={`price-${row.classId}`}>
              <h2 id={`price-${row.classId}`}>{row.label}</h2>
              <p className="muted">Going price: {row.medianPerGpuHourMicroUsd == null ? 'no other offer' : `${usd(row.medianPerGpuHourMicroUsd)} median`}.</p>
              <PriceForm
                path={`${OPERATOR_API}/prices`}
                current={row.yourPricePerGpuHourMicroUsd}
                body={(price) => ({ farm, classId: row.classId, pricePerGpuHour: price })}
                label={`Price per GPU-hour for ${row.label} (USD)`}
              />
            </section>
          ))
        }
      </QueryState>
    </Page>
  );
}
