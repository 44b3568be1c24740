import { timingSafeEqual } from 'node:crypto';
import '@fastify/cookie';
import { API_KEY_SCOPES, ApiError, type Environment } from '@gpufarm/shared';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { createBatcher } from '../db/batcher.js';
import type { Queryable } from '../db/database.js';
import { ADMIN_PREFIX, DASHBOARD_PREFIX, OPERATOR_PREFIX, webApiAreaOf } from '../http/route-config.js';
import { hashApiKey, keyEnvironmentFor, parseApiKey } from './api-keys.js';
import { authenticateMachine } from './machine-tokens.js';
import { isAdminWallet, type OperatorFarm } from './roles.js';
import { findWebSession, type WebSession } from './session-store.js';
import { findApiKeysByHash, operatorFarmsOf, touchApiKey, type ApiKeyRecord } from './store.js';
import { cookieOf, type WebCookies } from './web-cookies.js';

/** The session APIs of the web app's areas: the session cookie is the credential there, and only there. */
export const DASHBOARD_API_PREFIX = `${DASHBOARD_PREFIX}/api`;
export const OPERATOR_API_PREFIX = `${OPERATOR_PREFIX}/api`;
export const ADMIN_API_PREFIX = `${ADMIN_PREFIX}/api`;

export function isWebApi(url: string): boolean {
  return webApiAreaOf(url) !== null;
}

/** The header a dashboard write must carry: the session's CSRF token. */
export const CSRF_HEADER = 'x-csrf-token';

/** `lastUsedAt` is kept to this precision: a busy key costs one write a minute. */
const KEY_USE_RECORD_MS = 60_000;

export interface AuthOptions {
  db: Queryable;
  environment: Environment;
  adminToken: string | undefined;
  /** Wallets (lower case) whose sessions open the admin area. */
  adminWallets: readonly string[];
  /** The web app's cookies (`webCookies` of the public URL): the session cookie is read by its name. */
  cookies: WebCookies;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A credential the request carried and `resolveCredentials` refused; `enforceAuth` raises it. */
    credentialError: ApiError | null;
    /** The web session of the cookie (under a web area's `/api/` only), unexpired and of an active account. */
    webSession: WebSession | null;
    /** Under `/operator/api/`: the farms the session's wallet runs (payout or listed operator wallet). */
    operatorFarms: OperatorFarm[] | null;
    /** The cookie named a session that expired: "sign in again" rather than "not signed in". */
    webSessionExpired: boolean;
  }
}

/** The token of `Authorization: Bearer <token>`; undefined without the header, null when it is malformed. */
export function bearerToken(request: FastifyRequest): string | null | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/** Compares two secrets in constant time (for equal lengths). */
export function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * Two hooks around the rate limiter. `onRequest` (this plugin) resolves the API key (under
 * `/dashboard/api/`: the session cookie) into `request.principal`, or on a machine route the
 * machine token into `request.machine`, and remembers any credential error; the limiter then
 * counts the call against the key, session, machine or anonymous address;
 * `enforceAuth` (a later hook) raises the remembered error, a session write's missing CSRF token
 * or the route's scope requirement. So bad keys are rate limited too.
 */
export const resolveCredentials = fp<AuthOptions>(
  async (app, options) => {
    const wantedEnvironment = keyEnvironmentFor(options.environment);
    // Concurrent requests share one lookup: under load this halves the round trips of a creation.
    const findKey = createBatcher((hashes: readonly string[]) => findApiKeysByHash(options.db, hashes), { maxInFlight: 2, maxBatch: 64 });
    app.decorateRequest('principal', null);
    app.decorateRequest('isAdmin', false);
    app.decorateRequest('credentialError', null);
    app.decorateRequest('webSession', null);
    app.decorateRequest('webSessionExpired', false);
    app.decorateRequest('operatorFarms', null);
    app.decorateRequest('machine', null);
    const recordKeyUse = keyUseRecorder(app, options.db);
    app.addHook('onRequest', async (request) => {
      const { auth, webFile, probe } = request.routeOptions.config;
      // Read here so the limiter counts the machine; the route answers a missing or bad token itself.
      if (auth === 'machine') {
        request.machine = await authenticateMachine(options.db, request.headers.authorization);
        return;
      }
      // Those routes check their own credential (the metrics token or a URL's signature is no API key); the web app's files need none.
      if (auth === 'signed_url' || webFile || probe) return;
      if (isWebApi(request.url)) return resolveSession(app, options, request);
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
        request.principal = { keyId: record.keyId, apiKeyId: record.keyId, accountId: record.accountId, walletAddress: record.walletAddress, scopes: record.scopes };
        recordKeyUse(record);
      }
    });
  },
  { name: 'gpufarm-resolve-credentials', dependencies: ['@fastify/cookie'] },
);

/**
 * Under a web area's `/api/` the session cookie is the credential, with all four customer scopes;
 * an Authorization header there is refused, so a page cannot be made to act with someone's key.
 * An unknown cookie is no credential at all (the caller is "not signed in"). Under
 * `/operator/api/` the session's farms are looked up too; the admin role needs no lookup.
 */
async function resolveSession(app: FastifyInstance, options: AuthOptions, request: FastifyRequest): Promise<void> {
  if (request.headers.authorization !== undefined) {
    request.credentialError = new ApiError(
      'invalid_api_key',
      'The web app\'s API takes no Authorization header: its credential is the session cookie. Call /v1 with an API key instead.',
    );
    return;
  }
  const cookie = cookieOf(app, request, options.cookies.session);
  if (!cookie) return;
  const session = await findWebSession(options.db, cookie);
  if (!session) return;
  if (session.expiresAt.getTime() <= Date.now()) {
    request.webSessionExpired = true;
    return;
  }
  if (session.accountStatus === 'suspended') {
    request.credentialError = new ApiError('account_suspended');
    return;
  }
  request.webSession = session;
  if (webApiAreaOf(request.url) === OPERATOR_PREFIX) request.operatorFarms = await operatorFarmsOf(options.db, session.walletAddress);
  // Rate limits and the live-log cap count per session, as they count per key.
  request.principal = { keyId: `ses_${session.id.slice(0, 26)}`, apiKeyId: null, accountId: session.accountId, walletAddress: session.walletAddress, scopes: API_KEY_SCOPES };
}

/**
 * Records a key's use (`last_used_at`) at most once a minute per key, after the request goes on:
 * the write is not awaited, one per key is in flight at a time, and a failure is only logged.
 */
function keyUseRecorder(app: FastifyInstance, db: Queryable): (record: ApiKeyRecord) => void {
  const inFlight = new Set<string>();
  return (record) => {
    if (record.lastUsedAt && Date.now() - record.lastUsedAt.getTime() < KEY_USE_RECORD_MS) return;
    if (inFlight.has(record.keyId)) return;
    inFlight.add(record.keyId);
    touchApiKey(db, record.keyId)
      .catch((err: unknown) => app.log.warn({ err, keyId: record.keyId }, 'could not record the API key use'))
      .finally(() => inFlight.delete(record.keyId));
  };
}

export const enforceAuth = fp<{ adminWallets: readonly string[] }>(
  async (app, options) => {
    app.addHook('onRequest', async (request) => {
      const auth = request.routeOptions.config.auth;
      if (request.credentialError) throw request.credentialError;
      if (auth === undefined || auth === 'public' || auth === 'machine' || auth === 'signed_url') return;
      if (auth === 'admin') {
        if (request.headers.authorization === undefined) throw new ApiError('missing_api_key', 'No admin token was sent. Send it as "Authorization: Bearer <GF_ADMIN_TOKEN>".');
        return;
      }
      if (!request.principal) {
        if (!isWebApi(request.url)) throw new ApiError('missing_api_key');
        throw new ApiError('missing_api_key', request.webSessionExpired ? 'Your session expired: sign in again.' : 'Not signed in: sign in with your wallet.');
      }
      if (request.webSession && request.method !== 'GET' && request.method !== 'HEAD') {
        // A cross-site form or fetch carries the cookie (SameSite aside) but cannot read the token.
        const sent = request.headers[CSRF_HEADER];
        if (typeof sent !== 'string' || !sameSecret(sent, request.webSession.csrfToken)) {
          throw new ApiError('forbidden', 'The X-CSRF-Token header is missing or wrong: reload the dashboard.');
        }
      }
      if (auth === 'session' || auth === 'admin_session' || auth === 'operator_session') {
        const session = request.webSession;
        if (!session) throw new ApiError('missing_api_key', 'Not signed in: sign in with your wallet.');
        if (auth === 'admin_session' && !isAdminWallet(options.adminWallets, session.walletAddress)) {
          throw new ApiError('forbidden', `The wallet ${session.walletAddress} is not an admin of this service: sign in with an admin wallet.`);
        }
        if (auth === 'operator_session' && !request.operatorFarms?.length) {
          throw new ApiError('forbidden', `The wallet ${session.walletAddress} runs no farm: sign in with a farm's payout wallet or a wallet the farm lists as an operator.`);
        }
        return;
      }
      if (!request.principal.scopes.includes(auth)) {
        throw new ApiError('insufficient_scope', `This endpoint needs the ${auth} scope; the key has ${request.principal.scopes.join(', ') || 'no scopes'}.`);
      }
    });
  },
  { name: 'gpufarm-enforce-auth' },
);
