import type { UseQueryResult } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { EmptyState, ErrorState, Loading } from './states';

/**
 * The designed states of one query: loading, failed (with retry and request id), empty, or
 * `children` with the data.
 */
export function QueryState<T>({
  query,
  loading,
  errorTitle,
  isEmpty,
  empty,
  children,
}: {
  query: UseQueryResult<T>;
  loading: string;
  errorTitle: string;
  isEmpty?: (data: T) => boolean;
  empty?: { title: string; body?: ReactNode };
  children: (data: T) => ReactNode;
}) {
  if (query.isPending) return <Loading label={loading} />;
  if (query.isError) return <ErrorState error={query.error} title={errorTitle} retry={() => void query.refetch()} />;
  if (isEmpty?.(query.data) && empty) return <EmptyState title={empty.title}>{empty.body}</EmptyState>;
  return <>{children(query.data)}</>;
}
