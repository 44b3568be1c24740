import { GfError } from '@gpufarm/client/browser';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useApi } from './api';
import type { SessionView } from './session-api';

export const SESSION_KEY = ['session'] as const;

/** The signed-in session, null when not signed in; keeps the CSRF token for POSTs current. */
export function useSession() {
  const api = useApi();
  return useQuery({
    queryKey: SESSION_KEY,
    queryFn: async ({ signal }): Promise<SessionView | null> => {
      // A probe that a sign-in overtook (`useSetSession` cancels it) must not touch the new session's CSRF token.
      const session = await api.auth.session();
      if (!signal.aborted) api.setCsrfToken(session?.csrfToken ?? null);
      return session;
    },
    staleTime: 60_000,
    retry: false,
  });
}

/** Stores a fresh session (after sign-in) so every page sees it without a round trip. */
export function useSetSession() {
  const api = useApi();
  const queryClient = useQueryClient();
  return (session: SessionView | null) => {
    // A session probe still in flight (started before the sign-in, answered 401 after it) would
    // otherwise overwrite the new session with null and show the page signed out.
    void queryClient.cancelQueries({ queryKey: SESSION_KEY });
    api.setCsrfToken(session?.csrfToken ?? null);
    queryClient.setQueryData(SESSION_KEY, session);
  };
}

/** POST sign-out, then forget every cached answer of the account. */
export function useSignOut() {
  const api = useApi();
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: async () => {
      try {
        await api.auth.signOut();
      } catch (err) {
        // An expired session is signed out already.
        if (!(err instanceof GfError && err.status === 401)) throw err;
      }
    },
    onSettled: () => {
      api.setCsrfToken(null);
      queryClient.removeQueries({ predicate: (query) => query.queryKey[0] !== 'index' });
      queryClient.setQueryData(SESSION_KEY, null);
    },
  });
}
