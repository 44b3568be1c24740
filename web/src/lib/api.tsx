import { createBrowserClient, type BrowserClient } from '@gpufarm/client/browser';
import { artifactMetadataSchema, errorEnvelopeSchema, jobFitSchema, jobSummaryListSchema, jobTimelineSchema, outputFileListSchema, type ArtifactMetadata, type JobFit, type JobSummaryList, type JobTimeline, type OutputFileList } from '@gpufarm/shared';
import { createContext, useContext, useMemo, useRef, type ReactNode } from 'react';
import { z } from 'zod';
import { apiKeyCreatedSchema, apiKeyListSchema, apiKeyViewSchema, csrfFetch, DASHBOARD_API, nonceSchema, sessionViewSchema, type ApiKeyScope, type SessionView } from './session-api';

/** An answer whose body the page does not read (it refetches what changed). */
export const anyAnswer = z.unknown();

/** Everything the pages call: the SDK over `/dashboard/api` and the session-only endpoints. */
export interface DashboardApi {
  gf: BrowserClient;
  /** The fetch the SDK uses (cookie + CSRF header), for raw calls such as artifact bytes. */
  fetch: typeof fetch;
  auth: {
    nonce: () => Promise<{ nonce: string }>;
    signIn: (message: string, signature: string) => Promise<SessionView>;
    /** The signed-in session, null when there is none (204). */
    session: () => Promise<SessionView | null>;
    signOut: () => Promise<void>;
  };
  keys: {
    /** A page of the account's keys, newest first; `cursor` is the previous page's `nextCursor`. */
    list: (cursor?: string) => Promise<ReturnType<typeof apiKeyListSchema.parse>>;
    create: (body: { label?: string; scopes: ApiKeyScope[] }) => Promise<ReturnType<typeof apiKeyCreatedSchema.parse>>;
    revoke: (id: string) => Promise<ReturnType<typeof apiKeyViewSchema.parse>>;
  };
  jobs: {
    /** `GET /dashboard/api/jobs/:id/timeline`: each state with its time and transaction (dashboard only). */
    timeline: (id: string) => Promise<JobTimeline>;
    /** `GET /dashboard/api/jobs/:id/fit`: whether a machine offered now fits the job, and why not. */
    fit: (id: string) => Promise<JobFit>;
    /** `POST /dashboard/api/fit`: the same for a spec not created yet. */
    specFit: (spec: unknown) => Promise<JobFit>;
    /** `GET /dashboard/api/jobs/:id/output/files`: the files of the output the job's result names. */
    outputFiles: (id: string) => Promise<OutputFileList>;
    /** `GET /dashboard/api/jobs/summaries`: title, image and creation time of up to 100 of the account's jobs. */
    summaries: (ids: readonly string[]) => Promise<JobSummaryList>;
  };
  /**
   * A session call to any of the app's areas (`/dashboard/api/…`, `/operator/api/…`,
   * `/admin/api/…`: `path` is from the origin), its answer checked against `schema`.
   */
  request: <T>(call: AreaCall<T>) => Promise<T>;
  /**
   * `POST /dashboard/api/v1/artifacts`: one file stored as a job input, streamed, its progress
   * reported as it is sent (XMLHttpRequest: fetch reports no upload progress).
   */
  uploadInput: (file: Blob, opts: { filename: string; onProgress: (sent: number, total: number) => void; signal?: AbortSignal }) => Promise<ArtifactMetadata>;
  /** Remembers the CSRF token of the current session (null after sign-out). */
  setCsrfToken: (token: string | null) => void;
}

export interface AreaCall<T> {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  schema: z.ZodType<T> | null;
  /** The success statuses; unless given, 200 for a GET and any of 200, 201, 204 for a write. */
  status?: number | number[];
  query?: Record<string, string | number | undefined>;
  body?: unknown;
}

function createDashboardApi(origin: string, csrf: { current: string | null }): DashboardApi {
  const doFetch = csrfFetch(() => csrf.current);
  const gf = createBrowserClient({ baseUrl: `${origin}${DASHBOARD_API}`, fetch: doFetch });
  const areas = createBrowserClient({ baseUrl: origin, fetch: doFetch }).transport;
  // The dashboard's own routes go through the SDK's transport too: same timeouts, errors and schema checks.
  const call = async <T,>(method: 'GET' | 'POST', path: string, status: number, schema: z.ZodType<T> | null, body?: unknown, query?: Record<string, string>): Promise<T> =>
    (await gf.transport.request<T>({ method, path, body, query, expect: { [status]: schema }, retry: method === 'GET' })).body;
  return {
    gf,
    fetch: doFetch,
    auth: {
      nonce: () => call('POST', '/auth/nonce', 201, nonceSchema),
      signIn: (message, signature) => call('POST', '/auth/sign-in', 200, sessionViewSchema, { message, signature }),
      session: async () => (await gf.transport.request<SessionView | null>({ method: 'GET', path: '/auth/session', expect: { 200: sessionViewSchema, 204: null }, retry: true })).body,
      signOut: () => call<void>('POST', '/auth/sign-out', 204, null),
    },
    keys: {
      list: (cursor) => call('GET', '/keys', 200, apiKeyListSchema, undefined, cursor === undefined ? undefined : { cursor }),
      create: (body) => call('POST', '/keys', 201, apiKeyCreatedSchema, body),
      revoke: (id) => call('POST', `/keys/${encodeURIComponent(id)}/revoke`, 200, apiKeyViewSchema),
    },
    jobs: {
      timeline: (id) => call('GET', `/jobs/${encodeURIComponent(id)}/timeline`, 200, jobTimelineSchema),
      fit: (id) => call('GET', `/jobs/${encodeURIComponent(id)}/fit`, 200, jobFitSchema),
      specFit: (spec) => call('POST', '/fit', 200, jobFitSchema, spec),
      outputFiles: (id) => call('GET', `/jobs/${encodeURIComponent(id)}/output/files`, 200, outputFileListSchema),
      summaries: (ids) => call('GET', '/jobs/summaries', 200, jobSummaryListSchema, undefined, { ids: ids.join(',') }),
    },
    uploadInput: (file, { filename, onProgress, signal }) =>
      new Promise<ArtifactMetadata>((resolve, reject) => {
        const xhr = new XMLHttpRequest();
        xhr.open('POST', `${origin}${DASHBOARD_API}/v1/artifacts?filename=${encodeURIComponent(filename)}`);
        xhr.setRequestHeader('content-type', 'application/octet-stream');
        if (csrf.current) xhr.setRequestHeader('x-csrf-token', csrf.current);
        xhr.upload.onprogress = (event) => onProgress(event.loaded, event.lengthComputable ? event.total : file.size);
        xhr.onload = () => {
          let body: unknown = null;
          try {
            body = JSON.parse(xhr.responseText);
          } catch {
            // Not JSON: said below with the status.
          }
          if (xhr.status === 201) {
            const stored = artifactMetadataSchema.safeParse(body);
            if (stored.success) resolve(stored.data);
            else reject(new Error('gpufarm stored the file but answered in a shape this page does not know: reload the page.'));
            return;
          }
          const failure = errorEnvelopeSchema.safeParse(body);
          reject(new Error(failure.success ? failure.data.error.message : `The upload was answered with HTTP ${xhr.status}.`));
        };
        xhr.onerror = () => reject(new Error('The upload did not reach gpufarm (a network error): check the connection and add the file again.'));
        xhr.onabort = () => reject(new DOMException('The upload was stopped.', 'AbortError'));
        signal?.addEventListener('abort', () => xhr.abort(), { once: true });
        xhr.send(file);
      }),
    request: async <T,>(call: AreaCall<T>): Promise<T> =>
      (
        await areas.request<T>({
          method: call.method,
          path: call.path,
          // Empty filters are left out rather than sent as `?farm=`.
          query: call.query && Object.fromEntries(Object.entries(call.query).filter(([, v]) => v !== undefined && v !== '')),
          body: call.body ?? (call.method === 'GET' || call.method === 'DELETE' ? undefined : {}),
          expect: Object.fromEntries([call.status ?? (call.method === 'GET' ? 200 : [200, 201, 204])].flat().map((status) => [status, call.schema])),
          retry: call.method === 'GET',
        })
      ).body,
    setCsrfToken: (token) => {
      csrf.current = token;
    },
  };
}

const ApiContext = createContext<DashboardApi | null>(null);

export function ApiProvider({ children }: { children: ReactNode }) {
  const csrf = useRef<string | null>(null);
  const api = useMemo(() => createDashboardApi(location.origin, csrf), []);
  return <ApiContext.Provider value={api}>{children}</ApiContext.Provider>;
}

export function useApi(): DashboardApi {
  const api = useContext(ApiContext);
  if (!api) throw new Error('useApi needs an ApiProvider above it');
  return api;
}
