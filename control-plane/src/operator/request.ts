import { ApiError, errorForField, parseUsdToMicroUsd } from '@gpufarm/shared';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { OperatorFarm } from '../auth/roles.js';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import type { AuditActor } from '../fleet/audit.js';
import { intParam, parseParams } from '../http/parse.js';

/**
 * What every operator route reads from its request: the session's farms (another farm's rows
 * answer 404 `not_found`, as if they did not exist), the wallet that acts, and the fields the
 * routes share.
 */

export interface OperatorRoutesOptions {
  db: Database;
  offerIndex: OfferIndex;
  config: Pick<Config, 'publicUrl'>;
}

/** What each group of operator routes is given: the options, the prefix and the session requirement. */
export interface OperatorRouteDeps extends OperatorRoutesOptions {
  base: string;
  session: { config: { auth: 'operator_session' } };
}

export const machineParams = z.object({ id: z.string().regex(/^mach_[0-9a-z]{26}$/, 'is not a machine id') });
export const farmParams = z.object({ id: z.string().regex(/^farm_[0-9a-z]{26}$/, 'is not a farm id') });
export const farmSlug = z.string().regex(/^[a-z0-9][a-z0-9-]{1,62}$/, 'must be a farm slug');
/** USD per GPU-hour as a decimal string (at most 6 decimals); null: not offered. */
export const usdPrice = z.union([z.string(), z.number()]).nullable();
export const listQuery = z.strictObject({ farm: farmSlug.optional(), limit: intParam(1, 500, 50), cursor: z.string().max(200).optional() });
export const farmQuery = z.strictObject({ farm: farmSlug.optional() });
export const idCursor = z.object({ id: z.string() });

/** micro-USD of a USD price field; null stays null (not offered). */
export function priceField(value: string | number | null, field = 'pricePerGpuHour'): number | null {
  if (value === null) return null;
  const parsed = parseUsdToMicroUsd(value);
  if (!parsed.ok || parsed.microUsd === 0) throw errorForField('invalid_request', field, parsed.ok ? 'must be more than 0' : parsed.message, { subject: true });
  return parsed.microUsd;
}

export function farmsOf(request: FastifyRequest): OperatorFarm[] {
  return request.operatorFarms ?? [];
}

/** The session's wallet as the audit log's actor. */
export function actorOf(request: FastifyRequest): AuditActor {
  if (!request.webSession) throw new Error('an operator route was reached without a session');
  return { kind: 'operator_wallet', id: request.webSession.walletAddress };
}

/** The session's farms, or the one named by `farm` (404 when it is none of them). */
export function scope(request: FastifyRequest, slug: string | undefined): OperatorFarm[] {
  const farms = farmsOf(request);
  if (slug === undefined) return farms;
  const farm = farms.find((f) => f.slug === slug);
  if (!farm) throw new ApiError('not_found', `No farm ${slug}.`);
  return [farm];
}

export function ids(farms: readonly OperatorFarm[]): string[] {
  return farms.map((f) => f.id);
}

/** The session's farm named by the `:id` parameter (404 when it is none of them). */
export function farmOf(request: FastifyRequest): OperatorFarm {
  const { id } = parseParams(farmParams, request.params);
  const farm = farmsOf(request).find((f) => f.id === id);
  if (!farm) throw new ApiError('not_found', `No farm ${id}.`);
  return farm;
}
