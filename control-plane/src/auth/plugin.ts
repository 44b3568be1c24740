import { timingSafeEqual } from 'node:crypto';
import { ApiError, type Environment } from '@gpufarm/shared';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { createBatcher } from '../db/batcher.js';
import type { Queryable } from '../db/database.js';
import { hashApiKey, keyEnvironmentFor, parseApiKey } from './api-keys.js';
import { findApiKeysByHash } from './store.js';

export interface AuthOptions {
  db: Queryable;
  environment: Environment;
  adminToken: string | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A credential the request carried and `resolveCredentials` refused; `enforceAuth` raises it. */
    credentialError: ApiError | null;
  }
}

function bearerToken(request: FastifyRequest): string | null | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * Two hooks around the rate limiter. `onRequest` (this plugin) resolves the API key into
 * `request.principal` and remembers any credential error; the limiter then counts the call
 * against the key or the anonymous address; `enforceAuth` (a later hook) raises the remembered
 * error or the route's scope requirement. So bad keys are rate limited too.
 */
export const resolveCredentials = fp<AuthOptions>(
  async (app, options) => {
    const wantedEnvironment = keyEnvironmentFor(options.environment);
    // Concurrent requests share one lookup: under load this halves the round trips of a creation.
    const findKey = createBatcher((hashes: readonly string[]) => findApiKeysByHash(options.db, hashes), { maxInFlight: 2, maxBatch: 64 });
    app.decorateRequest('principal', null);
    app.decorateRequest('isAdmin', false);
    app.decorateRequest('credentialError', null);
    app.addHook('onRequest', async (request) => {
      const auth = request.routeOptions.config.auth;
      // Those routes check their own credential (a machine token is no API key).
      if (auth === 'machine' || auth === 'signed_url') return;
      const token = bearerToken(request);
      if (token === undefined) return;
      if (auth === 'admin') {
        if (!options.adminToken || token === null || !sameSecret(token, options.adminToken)) {
          request.credentialError = new ApiError('invalid_api_key', 'The admin token is wrong.');
        } else {
          request.isAdmin = true;
        }
        return;
      }
      if (token === null) {
        request.credentialError = new ApiError('invalid_api_key', 'The Authorization header must be "Bearer <API_KEY>".');
        return;
      }
      const parsed = parseApiKey(token);
      if (!parsed) {
        request.credentialError = new ApiError('invalid_api_key', 'The API key is malformed: keys look like gf_test_… or gf_live_… followed by 43 characters.');
        return;
      }
      if (parsed.environment !== wantedEnvironment) {
        request.credentialError = new ApiError(
          'wrong_environment',
          `This is a ${options.environment} deployment: it accepts gf_${wantedEnvironment}_ keys only, and this is a gf_${parsed.environment}_ key.`,
        );
        return;
      }
      const record = await findKey(hashApiKey(token));
      if (!record) {
        request.credentialError = new ApiError('invalid_api_key', 'The API key is unknown.');
      } else if (record.revokedAt) {
        request.credentialError = new ApiError('revoked_api_key');
      } else if (record.accountStatus === 'suspended') {
        request.credentialError = new ApiError('account_suspended');
      } else {
        request.principal = { keyId: record.keyId, accountId: record.accountId, walletAddress: record.walletAddress, scopes: record.scopes };
      }
    });
  },
  { name: 'gpufarm-resolve-credentials' },
);

export const enforceAuth = fp(
  async (app) => {
    app.addHook('onRequest', async (request) => {
      const auth = request.routeOptions.config.auth;
      if (request.credentialError) throw request.credentialError;
      if (auth === undefined || auth === 'public' || auth === 'machine' || auth === 'signed_url') return;
      if (auth === 'admin') {
        if (request.headers.authorization === undefined) throw new ApiError('missing_api_key', 'No admin token was sent. Send it as "Authorization: Bearer <GF_ADMIN_TOKEN>".');
        return;
      }
      if (!request.principal) throw new ApiError('missing_api_key');
      if (!request.principal.scopes.includes(auth)) {
        throw new ApiError('insufficient_scope', `This endpoint needs the ${auth} scope; the key has ${request.principal.scopes.join(', ') || 'no scopes'}.`);
      }
    });
  },
  { name: 'gpufarm-enforce-auth' },
);
