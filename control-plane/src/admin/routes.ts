import { API_KEY_SCOPES, ApiError, errorForField, formatMicroUsd, parseUsdToMicroUsd, type Environment } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { createAdminEnrollmentToken, ENROLLMENT_TOKEN_TTL_SECONDS } from '../farms/enrollment-tokens.js';
import { apiKeyParams, keyEnvironmentFor } from '../auth/api-keys.js';
import { deleteAccountWebSessions } from '../auth/session-store.js';
import { createApiKey, revokeApiKey, setAccountStatus } from '../auth/store.js';
import type { Database } from '../db/database.js';
import { recordAudit, type AuditActor } from '../fleet/audit.js';
import { parseBody, parseParams } from '../http/parse.js';
import { findMachineVerification, recentChallenges } from '../machine-verification/challenge-store.js';
import { challengeView, gpuProofView } from './challenge-view.js';

export const createKeyBodySchema = z
  .object({
    walletAddress: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address'),
    scopes: z.array(z.enum(API_KEY_SCOPES)).min(1, 'must list at least one scope'),
    label: z.string().max(100).nullable().optional(),
  })
  .strict();

export const createEnrollmentTokenBodySchema = z.strictObject({
  /** The farm's slug; created when missing. */
  farm: z.string().regex(/^[a-z0-9][a-z0-9-]{1,62}$/, 'must be a slug of lowercase letters, digits and -, 2 to 63 characters'),
  /** The farm's name (and provider) when it is created. */
  farmName: z.string().min(1).max(100).nullable().optional(),
  payoutAddress: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address').nullable().optional(),
  regionKey: z.string().min(1).max(64),
  /** USD per GPU hour (a number or decimal string, at most 6 decimals); null: enrolled but not offered. */
  pricePerGpuHour: z.union([z.string(), z.number()]).nullable(),
  label: z.string().max(100).nullable().optional(),
  /** How long the token can be used; one day by default. */
  ttlSeconds: z.int().min(60).max(30 * 86_400).optional(),
});

const accountParams = z.object({ id: z.string().regex(/^acct_[0-9a-z]{26}$/, 'is not an account id') });
const machineParams = z.object({ id: z.string().regex(/^mach_[0-9a-z]{26}$/, 'is not a machine id') });

/**
 * The operator's API (`Authorization: Bearer <GF_ADMIN_TOKEN>`), registered only when an admin
 * token is configured: create and revoke API keys, suspend and reactivate accounts, create
 * one-time enrollment tokens for farm machines.
 * `npm run admin` calls it when the embedded database belongs to a running server.
 */
export const adminRoutes: FastifyPluginAsync<{ db: Database; environment: Environment; maxApiKeys: number }> = async (app, { db, environment, maxApiKeys }) => {
  const admin = { config: { auth: 'admin' as const } };
  // The token names no person: every write is recorded as the admin token's.
  const actor: AuditActor = { kind: 'admin_token', id: 'GF_ADMIN_TOKEN' };

  app.post('/admin/v1/api-keys', admin, async (request, reply) => {
    const body = parseBody(createKeyBodySchema, request.body);
    const created = await createApiKey(db, {
      walletAddress: body.walletAddress,
      scopes: body.scopes,
      label: body.label ?? null,
      environment: keyEnvironmentFor(environment),
      maxActiveKeys: maxApiKeys,
    });
    await recordAudit(db, { actor, action: 'api_key.create', targetType: 'api_key', targetId: created.keyId, details: { walletAddress: body.walletAddress.toLowerCase(), scopes: body.scopes } });
    return reply.code(201).send({ object: 'api_key', ...created });
  });

  app.post('/admin/v1/api-keys/:id/revoke', admin, async (request) => {
    const { id } = parseParams(apiKeyParams, request.params);
    if (!(await revokeApiKey(db, id))) throw new ApiError('not_found', `No API key ${id}.`);
    await recordAudit(db, { actor, action: 'api_key.revoke', targetType: 'api_key', targetId: id });
    return { object: 'api_key', id, revoked: true };
  });

  app.post('/admin/v1/enrollment-tokens', admin, async (request, reply) => {
    const body = parseBody(createEnrollmentTokenBodySchema, request.body);
    let price: number | null = null;
    if (body.pricePerGpuHour !== null) {
      const parsed = parseUsdToMicroUsd(body.pricePerGpuHour);
      if (!parsed.ok || parsed.microUsd === 0) {
        throw errorForField('invalid_request', 'pricePerGpuHour', parsed.ok ? 'must be more than 0' : parsed.message, { subject: true });
      }
      price = parsed.microUsd;
    }
    const created = await createAdminEnrollmentToken(db, {
      farmSlug: body.farm,
      farmName: body.farmName ?? null,
      payoutAddress: body.payoutAddress ?? null,
      regionKey: body.regionKey,
      pricePerGpuHourMicroUsd: price,
      label: body.label ?? null,
      ttlSeconds: body.ttlSeconds ?? ENROLLMENT_TOKEN_TTL_SECONDS,
      actor,
    });
    return reply.code(201).send({
      object: 'enrollment_token',
      token: created.token,
      farm: created.farm,
      regionKey: created.regionKey,
      pricePerGpuHour: price === null ? null : formatMicroUsd(price),
      expiresAt: created.expiresAt.toISOString(),
      payoutChange: created.payoutChange,
    });
  });

  for (const [action, status] of [['suspend', 'suspended'], ['reactivate', 'active']] as const) {
    app.post(`/admin/v1/accounts/:id/${action}`, admin, async (request) => {
      const { id } = parseParams(accountParams, request.params);
      if (!(await setAccountStatus(db, id, status))) throw new ApiError('not_found', `No account ${id}.`);
      const sessionsEnded = status === 'suspended' ? await deleteAccountWebSessions(db, id) : 0;
      await recordAudit(db, { actor, action: `account.${action}`, targetType: 'account', targetId: id, details: { sessionsEnded } });
      return { object: 'account', id, status };
    });
  }

  // What the machine claims beside what the control plane verified of it: an admin sees where they differ.
  app.get('/admin/v1/machines/:id', admin, async (request) => {
    const { id } = parseParams(machineParams, request.params);
    const machine = await findMachineVerification(db, id);
    if (!machine) throw new ApiError('not_found', `No machine ${id}.`);
    const { verification: status, simulated: _simulated, ...proof } = gpuProofView(machine);
    return {
      object: 'machine',
      id: machine.machineId,
      status: machine.status,
      healthReason: machine.healthReason,
      simulated: machine.simulated,
      claimedTier: machine.claimedTier,
      verification: { status, ...proof, claims: machine.claims },
      challenges: (await recentChallenges(db, id)).map(challengeView),
    };
  });
};
