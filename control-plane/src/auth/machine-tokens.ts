import { createHash, randomBytes } from 'node:crypto';
import { ApiError, machineTokenSchema } from '@gpufarm/shared';
import type { FastifyRequest } from 'fastify';
import type { Queryable } from '../db/database.js';
import type { MachinePrincipal } from '../http/route-config.js';
import { findMachineByTokenHash } from './store.js';

/**
 * Machine tokens (`gfa_…`): the bearer credential of an enrolled agent on its WebSocket and on
 * its artifact uploads. Only the SHA-256 is stored (`machines.token_hash`).
 */

/** The stored form of a machine or enrollment token: lowercase hex SHA-256 of its text. */
export function hashAgentToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** A new token with `prefix` (`gfa` or `gfe`): 32 random bytes, base64url. */
export function newAgentToken(prefix: 'gfa' | 'gfe'): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}

/** The token of `Authorization: Bearer gfa_…`, or null when the header is absent or not that form. */
export function machineTokenFromHeader(authorizationHeader: string | undefined): string | null {
  if (authorizationHeader === undefined) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorizationHeader);
  if (!match || !machineTokenSchema.safeParse(match[1]).success) return null;
  return match[1]!;
}

/**
 * The enrolled machine an `Authorization: Bearer gfa_…` header belongs to; null when the
 * header is missing or malformed, the token unknown, or the machine disabled by an operator.
 * Used by the agent's WebSocket upgrade and its HTTP uploads.
 *
 * @example
 *   const machine = await authenticateMachine(db, request.headers.authorization);
 *   if (!machine) throw new ApiError('invalid_api_key', 'The machine token is unknown.');
 */
export async function authenticateMachine(
  db: Queryable,
  authorizationHeader: string | undefined,
): Promise<MachinePrincipal | null> {
  const token = machineTokenFromHeader(authorizationHeader);
  if (token === null) return null;
  return findMachineByTokenHash(db, hashAgentToken(token));
}

/**
 * The machine a `machine` route's request came from (`request.machine`, read by
 * `auth/plugin.ts`), or the 401 for a missing token (`missing_api_key`) or a malformed,
 * unknown or disabled one (`invalid_api_key`, with `invalidMessage`).
 */
export function requireMachine(request: FastifyRequest, invalidMessage = 'The machine token is malformed, unknown, or its machine is disabled.'): MachinePrincipal {
  if (request.machine) return request.machine;
  throw request.headers.authorization === undefined
    ? new ApiError('missing_api_key', 'No machine token was sent. Send it as "Authorization: Bearer gfa_…".')
    : new ApiError('invalid_api_key', invalidMessage);
}
