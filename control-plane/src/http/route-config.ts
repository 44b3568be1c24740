import type { ApiKeyScope } from '@gpufarm/shared';
import type { RouteTable } from './route-table.js';

/** Where the customer dashboard (its files and its API, `/dashboard/api`) is served: same-origin only, never CORS. */
export const DASHBOARD_PREFIX = '/dashboard';
/** The farm operators' area of the same web app (`/operator/api` on the session). */
export const OPERATOR_PREFIX = '/operator';
/** The admins' area of the same web app (`/admin/api` on the session; `/admin/v1` is the admin-token API). */
export const ADMIN_PREFIX = '/admin';
/** The web app's three areas: their pages and their session APIs (`<area>/api`) are same-origin only. */
export const WEB_AREA_PREFIXES = [DASHBOARD_PREFIX, OPERATOR_PREFIX, ADMIN_PREFIX] as const;
export type WebAreaPrefix = (typeof WEB_AREA_PREFIXES)[number];

function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`) || path.startsWith(`${prefix}?`);
}

/** The web area a path belongs to (pages or session API), or null. */
export function webAreaOf(path: string): WebAreaPrefix | null {
  return WEB_AREA_PREFIXES.find((prefix) => under(path, prefix)) ?? null;
}

/** The session API of a web area (`/dashboard/api`, `/operator/api`, `/admin/api`): the cookie is the credential there, and only there. */
export function webApiAreaOf(path: string): WebAreaPrefix | null {
  return WEB_AREA_PREFIXES.find((prefix) => under(path, `${prefix}/api`)) ?? null;
}

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

/** The enrolled machine a machine token (`gfa_…`) belongs to. */
export interface MachinePrincipal {
  machineId: string;
  farmId: string;
}

/** Buckets with their own limit besides the per-key one (the spec's Limits table). */
export type RouteRateBucket = 'jobs_create' | 'fund_confirm' | 'artifact_download' | 'input_upload';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Who may call the route: `public` (no key needed), an API key scope, `admin` (the admin
     * token), `machine` (an agent's machine token `gfa_…`, checked by the route itself) or
     * `signed_url` (the URL's signature is the credential) or `session` (a web session
     * cookie, under a web area's `/api/` only), `admin_session` (a session of a wallet in
     * `GF_ADMIN_WALLETS`, under `/admin/api/`) or `operator_session` (a session of a farm's
     * payout or listed operator wallet, under `/operator/api/`). Every /v1 route states one; the
     * not-found handler has none. `machine` and `signed_url` calls are not counted as anonymous
     * calls: a farm behind one address uploads for many jobs, and each signed URL was counted
     * when `GET /v1/artifacts/:id` issued it.
     */
    auth?: 'public' | ApiKeyScope | 'admin' | 'machine' | 'signed_url' | 'session' | 'admin_session' | 'operator_session';
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
    /** On a `machine` route: the enrolled machine whose token the call carried; null when none or not valid. */
    machine: MachinePrincipal | null;
  }
}
