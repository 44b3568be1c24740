import { type Environment } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
export interface AuthOptions {
    db: Queryable;
    environment: Environment;
    adminToken: string | undefined;
}
/**
 * Two hooks around the rate limiter. `onRequest` (this plugin) resolves the API key into
 * `request.principal` and remembers any credential error; the limiter then counts the call
 * against the key or the anonymous address; `enforceAuth` (a later hook) raises the remembered
 * error or the route's scope requirement. So bad keys are rate limited too.
 */
export declare const resolveCredentials: import("fastify").FastifyPluginCallback<AuthOptions, import("fastify").RawServerDefault, import("fastify").FastifyTypeProviderDefault, import("fastify").FastifyBaseLogger>;
export declare const enforceAuth: (app: import("fastify").FastifyInstance<import("fastify").RawServerDefault, import("http").IncomingMessage, import("http").ServerResponse<import("http").IncomingMessage>, import("fastify").FastifyBaseLogger, import("fastify").FastifyTypeProviderDefault>) => Promise<void>;
