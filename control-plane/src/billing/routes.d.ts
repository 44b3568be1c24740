import type { FastifyPluginAsync } from 'fastify';
import type { Queryable } from '../db/database.js';
/** `GET /v1/billing` [billing:read]: the account's billing entries, newest first. */
export declare const billingRoutes: FastifyPluginAsync<{
    db: Queryable;
}>;
