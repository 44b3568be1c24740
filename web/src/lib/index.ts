import { useQuery } from '@tanstack/react-query';
import { useApi } from './api';

/** `GET /dashboard/api/v1`: the deployment's chain id, environment and links (public). */
export function useServiceIndex() {
  const { gf } = useApi();
  return useQuery({ queryKey: ['index'], queryFn: () => gf.index(), staleTime: Infinity, retry: 2 });
}
