import { withdrawalListSchema } from '@gpufarm/shared';
import { useQuery, useQueryClient, type QueryKey } from '@tanstack/react-query';
import { lazy, Suspense, useState } from 'react';
import { useApi } from '../lib/api';
import { useSession } from '../lib/session';
import { Loading } from './states';

// The wallet's write path loads only when something waits for withdrawal: it stays out of the first load.
const WithdrawalsTable = lazy(() => import('./withdrawals').then((m) => ({ default: m.WithdrawalsTable })));

/**
 * "Waiting for withdrawal": what the escrow holds for the signed-in person's wallets (a release's
 * payout it could not send: a wallet that refused ETH, a token that blocked it), read from `path`
 * (`/dashboard/api/withdrawals`, `/operator/api/withdrawals`), with the Withdraw each wallet
 * sends. Shown only while something waits, and for the rest of the visit after, so the outcome of
 * a withdrawal sent here can be read. A mined withdrawal refetches the queries under `refresh`.
 */
export function WithdrawalsCard({ queryKey, path, query, intro, caption, refresh }: { queryKey: QueryKey; path: string; query?: Record<string, string>; intro: string; caption: string; refresh: QueryKey }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const session = useSession();
  const waiting = useQuery({ queryKey, queryFn: () => api.request({ method: 'GET', path, query, schema: withdrawalListSchema }), refetchInterval: 15_000 });
  const [shown, setShown] = useState(false);
  const rows = waiting.data?.data ?? [];
  if (rows.length > 0 && !shown) setShown(true);
  if (!shown && rows.length === 0) return null;
  return (
    <section aria-labelledby="withdrawals-heading" className="card">
      <h2 id="withdrawals-heading">Waiting for withdrawal</h2>
      {rows.length > 0 ? <p>{intro}</p> : <p className="muted">Nothing waits for withdrawal.</p>}
      <Suspense fallback={<Loading />}>
        <WithdrawalsTable rows={rows} caption={caption} signedInAs={session.data?.address ?? null} onMined={() => void queryClient.invalidateQueries({ queryKey: refresh })} />
      </Suspense>
    </section>
  );
}
