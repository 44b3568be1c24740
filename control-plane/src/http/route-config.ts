import type { ApiKeyScope } from '@gpufarm/shared';
import type { RouteTable } from './route-table.js';

/** Where the dashboard (its files and its API, `/dashboard/api`) is served: same-origin only, never CORS. */
export const DASHBOARD_PREFIX = '/dashboard';

/** Who is calling: the API key (or dashboard session) and the account that owns it. */
export interface Principal {
  /** What rate limits count against: the key's id, or `ses_…` for a dashboard session. */
  keyId: string;
  /** The API key, recorded on what it creates (a job); null for a dashboard session. */
  apiKeyId: string | null;
  accountId: string;
  walletAddress: string;
  scopes: readonly ApiKeyScope[];
}

/** Buckets with their own limit besides the per-key one (the spec's Limits table). */
export type RouteRateBucket = 'jobs_create' | 'fund_confirm' | 'artifact_download' | 'input_upload';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Who may call the route: `public` (no key needed), an API key scope, `admin` (the admin
     * token), `machine` (an agent's machine token `gfa_…`, checked by the route itself) or
     * `signed_url` (the URL's signature is the credential) or `session` (a dashboard session
     * cookie, under `/dashboard/api/` only). Every /v1 route states one; the
     * not-found handler has none. `machine` and `signed_url` calls are not counted as anonymous
     * calls: a farm behind one address uploads for many jobs, and each signed URL was counted
     * when `GET /v1/artifacts/:id` issued it.
     */
    auth?: 'public' | ApiKeyScope | 'admin' | 'machine' | 'signed_url' | 'session';
    rateBucket?: RouteRateBucket;
    /** A file of the dashboard's web app: not rate limited (a page load fetches several) and sent no CORS header. */
    webFile?: true;
    /**
     * A probe of balancers and Prometheus (`/healthz`, `/readyz`, `/metrics`): no API key is
     * read (the route checks its own token, if any) and it is not rate limited.
     */
    probe?: true;
  }
  interface FastifyInstance {
    /** The app's routes as registered (see `route-table.ts`). */
    routeTable: RouteTable;
  }
  interface FastifyRequest {
    /** The API key's owner, once the key was checked; null for anonymous calls. */
    principal: Principal | null;
    /** True when the call carried the right admin token for an admin route. */
    isAdmin: boolean;
  }
}
