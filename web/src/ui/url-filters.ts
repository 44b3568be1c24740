import type { FormEvent } from 'react';
import { useLocation, useSearch } from 'wouter';

/**
 * Filters held in the URL's query, so a filtered list can be linked, reloaded and gone back to:
 * `params` are the current ones; `apply` is a form's submit handler that puts every non-empty
 * named field of the form into the query of `path`.
 */
export function useUrlFilters(path: string) {
  const search = useSearch();
  const [, navigate] = useLocation();
  const apply = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [key, value] of new FormData(e.currentTarget)) {
      if (typeof value === 'string' && value.trim()) next.set(key, value.trim());
    }
    navigate(`${path}${next.size ? `?${next}` : ''}`);
  };
  return { search, params: new URLSearchParams(search), apply };
}
