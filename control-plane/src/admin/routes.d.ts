import { type Environment } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { Queryable } from '../db/database.js';
export declare const createKeyBodySchema: z.ZodObject<{
    walletAddress: z.ZodString;
    scopes: z.ZodArray<z.ZodEnum<{
        "jobs:create": "jobs:create";
        "jobs:read": "jobs:read";
        "artifacts:read": "artifacts:read";
        "billing:read": "billing:read";
    }>>;
    label: z.ZodOptional<z.ZodNullable<z.ZodString>>;
}, z.core.$strict>;
/**
 * The operator's API (`Authorization: Bearer <GF_ADMIN_TOKEN>`), registered only when an admin
 * token is configured: create and revoke API keys, suspend and reactivate accounts.
 * `npm run admin` calls it when the embedded database belongs to a running server.
 */
export declare const adminRoutes: FastifyPluginAsync<{
    db: Queryable;
    environment: Environment;
}>;
