import { API_KEY_SCOPES, ApiError, type Environment } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { keyEnvironmentFor } from '../auth/api-keys.js';
import { createApiKey, revokeApiKey, setAccountStatus } from '../auth/store.js';
import type { Queryable } from '../db/database.js';
import { parseBody, parseParams } from '../http/parse.js';

export const createKeyBodySchema = z
  .object({
    walletAddress: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address'),
    scopes: z.array(z.enum(API_KEY_SCOPES)).min(1, 'must list at least one scope'),
    label: z.string().max(100).nullable().optional(),
  })
  .strict();

const keyParams = z.object({ id: z.string().regex(/^key_[0-9a-z]{26}$/, 'is not an API key id') });
const accountParams = z.object({ id: z.string().regex(/^acct_[0-9a-z]{26}$/, 'is not an account id') });

/**
 * The operator's API (`Authorization: Bearer <GF_ADMIN_TOKEN>`), registered only when an admin
 * token is configured: create and revoke API keys, suspend and reactivate accounts.
 * `npm run admin` calls it when the embedded database belongs to a running server.
 */
export const adminRoutes: FastifyPluginAsync<{ db: Queryable; environment: Environment }> = async (app, { db, environment }) => {
  const admin = { config: { auth: 'admin' as const } };

  app.post('/admin/v1/api-keys', admin, async (request, reply) => {
    const body = parseBody(createKeyBodySchema, request.body);
    const created = await createApiKey(db, {
      walletAddress: body.walletAddress,
      scopes: body.scopes,
      label: body.label ?? null,
      environment: keyEnvironmentFor(environment),
    });
    return reply.code(201).send({ object: 'api_key', ...created });
  });

  app.post('/admin/v1/api-keys/:id/revoke', admin, async (request) => {
    const { id } = parseParams(keyParams, request.params);
    if (!(await revokeApiKey(db, id))) throw new ApiError('not_found', `No API key ${id}.`);
    return { object: 'api_key', id, revoked: true };
  });

  for (const [action, status] of [['suspend', 'suspended'], ['reactivate', 'active']] as const) {
    app.post(`/admin/v1/accounts/:id/${action}`, admin, async (request) => {
      const { id } = parseParams(accountParams, request.params);
      if (!(await setAccountStatus(db, id, status))) throw new ApiError('not_found', `No account ${id}.`);
      return { object: 'account', id, status };
    });
  }
};
