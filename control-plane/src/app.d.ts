import { type FastifyInstance } from 'fastify';
import type { OfferIndex } from './capacity/offer-index.js';
import type { Config } from './config.js';
import type { Database } from './db/database.js';
import type { RateLimitStore } from './http/rate-limit-store.js';
import './http/route-config.js';
/** Everything the HTTP app needs, built once in `server.ts` (or a test) and passed in. */
export interface AppDeps {
    config: Config;
    db: Database;
    rateLimitStore: RateLimitStore;
    clientHashSalt: string;
    offerIndex: OfferIndex;
    /** false in tests; the server logs JSON lines at `config.logLevel`. */
    logger?: boolean;
}
/** The control plane's fastify app: cross-cutting rules first, then each slice's routes. */
export declare function buildApp(deps: AppDeps): Promise<FastifyInstance>;
