import { useLocation, useSearch } from 'wouter';
import { useSession } from '../../lib/session';
import type { OperatorFarm } from '../../lib/session-api';

/** The farm the page shows (its slug, `''` for all the wallet runs), held in the URL's `farm`. */
export function useFarmParam(): [string, (slug: string) => void] {
  const search = useSearch();
  const [location, navigate] = useLocation();
  const params = new URLSearchParams(search);
  const farm = params.get('farm') ?? '';
  const setFarm = (slug: string) => {
    if (slug) params.set('farm', slug);
    else params.delete('farm');
    navigate(`${location}${params.size ? `?${params}` : ''}`, { replace: true });
  };
  return [farm, setFarm];
}

/** The farms the signed-in wallet runs (from its session). */
export function useOperatorFarms(): OperatorFarm[] {
  return useSession().data?.roles.operatorFarms ?? [];
}

/** A farm picker held in the URL, shown when the wallet runs more than one farm. */
export function FarmFilter({ allowAll = true }: { allowAll?: boolean }) {
  const [farm, setFarm] = useFarmParam();
  return <FarmSelect value={farm} onChange={setFarm} allowAll={allowAll} />;
}

/** A select of the wallet's farms by slug (`''`: all of them, when `allowAll`); nothing when it runs one farm. */
export function FarmSelect({ value, onChange, allowAll }: { value: string; onChange: (slug: string) => void; allowAll: boolean }) {
  const farms = useOperatorFarms();
  if (farms.length < 2) return null;
  return (
    <label className="field">
      <span>Farm</span>
      <select value={value} onChange={(e) => onChange(e.target.value)}>
        {allowAll ? <option value="">All your farms</option> : null}
        {farms.map((f) => (
          <option key={f.id} value={f.slug}>
            {f.name} ({f.slug})
          </option>
        ))}
      </select>
    </label>
  );
}
