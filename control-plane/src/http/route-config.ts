import type { ApiKeyScope } from '@gpufarm/shared';
import type { RouteTable } from './route-table.js';

/** Who is calling: the API key and the account that owns it. */
export interface Principal {
  keyId: string;
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
     * `signed_url` (the URL's signature is the credential). Every /v1 route states one; the
     * not-found handler has none. `machine` and `signed_url` calls are not counted as anonymous
     * calls: a farm behind one address uploads for many jobs, and each signed URL was counted
     * when `GET /v1/artifacts/:id` issued it.
     */
    auth?: 'public' | ApiKeyScope | 'admin' | 'machine' | 'signed_url';
    rateBucket?: RouteRateBucket;
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
