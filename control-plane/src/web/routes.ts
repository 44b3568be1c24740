import { API_KEY_SCOPES, ApiError } from '@gpufarm/shared';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { Chain, Client, Transport } from 'viem';
import { z } from 'zod';
import { apiKeyParams, keyEnvironmentFor } from '../auth/api-keys.js';
import { ADMIN_API_PREFIX, DASHBOARD_API_PREFIX, OPERATOR_API_PREFIX, sessionCookieOf } from '../auth/plugin.js';
import { webRolesOf, type OperatorFarm, type WebRoles } from '../auth/roles.js';
import { createWebSession, deleteWebSession, SESSION_COOKIE, type WebSession } from '../auth/session-store.js';
import { createApiKey, ensureAccount, findApiKey, listApiKeys, revokeApiKey, type ApiKeySummary } from '../auth/store.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import type { RateLimitStore } from '../http/rate-limit-store.js';
import { parseBody, parseParams } from '../http/parse.js';
import { requireAccountJob } from '../jobs/account-job.js';
import { jobTimeline } from '../jobs/timeline.js';
import { checkSignIn, newSiweNonce, NONCE_TTL_SECONDS } from './siwe.js';
import { insertSiweNonce } from './store.js';
import { MAX_SIGNATURE_BYTES } from './wallet-signature.js';

const signInBodySchema = z.strictObject({
  message: z.string().min(1, 'must be the EIP-4361 message the wallet signed').max(8192),
  signature: z
    .string()
    .max(2 + 2 * MAX_SIGNATURE_BYTES, `must be at most ${MAX_SIGNATURE_BYTES} bytes`)
    .regex(/^0x([0-9a-fA-F]{2})+$/, 'must be the signature as 0x-prefixed hex') as z.ZodType<`0x${string}`>,
});

const createKeyBodySchema = z.strictObject({
  label: z.string().min(1).max(64).optional(),
  scopes: z.array(z.enum(API_KEY_SCOPES)).min(1, 'must list at least one scope').max(API_KEY_SCOPES.length),
});

function farmView(farm: OperatorFarm) {
  return { id: farm.id, slug: farm.slug, name: farm.name, payoutAddress: farm.payoutAddress, role: farm.role };
}

/** What the web app knows of its session (never the cookie), with the areas its wallet may open. */
function sessionView(session: Pick<WebSession, 'walletAddress' | 'chainId' | 'expiresAt' | 'csrfToken'>, roles: WebRoles) {
  return {
    address: session.walletAddress,
    chainId: session.chainId,
    expiresAt: session.expiresAt.toISOString(),
    csrfToken: session.csrfToken,
    roles: { admin: roles.admin, operatorFarms: roles.operatorFarms.map(farmView) },
  };
}

/** A key as its owner sees it: `gf_test_…abcd` tells keys apart without giving any away. */
function apiKeyView(key: ApiKeySummary) {
  return {
    id: key.id,
    prefix: `gf_${key.environment}_…${key.lastFour}`,
    label: key.label,
    scopes: key.scopes,
    createdAt: key.createdAt.toISOString(),
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
    revokedAt: key.revokedAt?.toISOString() ?? null,
  };
}

export interface WebRoutesOptions {
  db: Database;
  /** Read at each request: the public URL may be known only once the server listens. */
  config: Pick<Config, 'publicUrl' | 'chainId' | 'environment' | 'web' | 'adminWallets'>;
  /** The chain's public client, for contract wallets' signatures. */
  chainClient: Client<Transport, Chain>;
  /** Where the budgets of contract-wallet checks are counted (the rate limits' store) and the salt that hashes client addresses. */
  signInLimits: { store: RateLimitStore; clientHashSalt: string };
}

/**
 * The dashboard's own API under `/dashboard/api`: Sign-In with Ethereum sessions (nonce,
 * sign-in, session, sign-out), the account's API keys and a job's timeline. The `/v1` routes it also serves
 * there are the same plugins registered a second time (see `app.ts`).
 */
export const webRoutes: FastifyPluginAsync<WebRoutesOptions> = async (app, { db, config, chainClient, signInLimits }) => {
  const base = DASHBOARD_API_PREFIX;
  const cookieOptions = () => ({ path: '/', httpOnly: true, sameSite: 'strict' as const, secure: config.publicUrl.startsWith('https:') });
  const signedOut = (reply: FastifyReply) => reply.clearCookie(SESSION_COOKIE, cookieOptions());
  const sessionOf = (session: WebSession | null): WebSession => {
    if (!session) throw new Error('a session route was reached without a session');
    return session;
  };

  app.post(`${base}/auth/nonce`, { config: { auth: 'public' } }, async (_request, reply) => {
    const nonce = newSiweNonce();
    const expiresAt = await insertSiweNonce(db, nonce, NONCE_TTL_SECONDS);
    return reply.code(201).send({ nonce, expiresAt: expiresAt.toISOString() });
  });

  app.post(`${base}/auth/sign-in`, { config: { auth: 'public' } }, async (request, reply) => {
    const body = parseBody(signInBodySchema, request.body);
    const signer = await checkSignIn(
      { db, wallets: { client: chainClient, limits: signInLimits } },
      { message: body.message, signature: body.signature, expected: { publicUrl: config.publicUrl, requestHost: request.host, chainId: config.chainId }, clientAddress: request.ip },
    );
    const account = await ensureAccount(db, signer.address);
    if (account.status === 'suspended') throw new ApiError('account_suspended');
    const { cookie, session } = await createWebSession(db, {
      accountId: account.id,
      walletAddress: signer.address,
      chainId: signer.chainId,
      ttlSeconds: config.web.sessionTtlSeconds,
      replacing: sessionCookieOf(app, request),
    });
    reply.setCookie(SESSION_COOKIE, cookie, { ...cookieOptions(), maxAge: config.web.sessionTtlSeconds });
    return sessionView(session, await webRolesOf(db, config.adminWallets, session.walletAddress));
  });

  app.get(`${base}/auth/session`, { config: { auth: 'session' } }, async (request) => {
    const session = sessionOf(request.webSession);
    return sessionView(session, await webRolesOf(db, config.adminWallets, session.walletAddress));
  });

  app.post(`${base}/auth/sign-out`, { config: { auth: 'session' } }, async (request, reply) => {
    const cookie = sessionCookieOf(app, request);
    if (cookie) await deleteWebSession(db, cookie);
    return signedOut(reply).code(204).send();
  });

  app.get(`${base}/keys`, { config: { auth: 'session' } }, async (request) => {
    const keys = await listApiKeys(db, sessionOf(request.webSession).accountId);
    return { data: keys.map(apiKeyView) };
  });

  app.post(`${base}/keys`, { config: { auth: 'session' } }, async (request, reply) => {
    const body = parseBody(createKeyBodySchema, request.body);
    const session = sessionOf(request.webSession);
    const created = await createApiKey(db, { walletAddress: session.walletAddress, scopes: body.scopes, label: body.label ?? null, environment: keyEnvironmentFor(config.environment) });
    const key = await findApiKey(db, session.accountId, created.keyId);
    if (!key) throw new Error(`key ${created.keyId} vanished after its creation`);
    return reply.code(201).send({ key: created.key, apiKey: apiKeyView(key) });
  });

  app.post(`${base}/keys/:id/revoke`, { config: { auth: 'session' } }, async (request) => {
    const { id } = parseParams(apiKeyParams, request.params);
    // Another account's key is answered as no key at all: its existence is not told.
    const revoked = await revokeApiKey(db, id, sessionOf(request.webSession).accountId);
    if (!revoked) throw new ApiError('not_found', `No API key ${id}.`);
    return apiKeyView(revoked);
  });

  // The other areas' sessions: who is signed in there and what they may run (403 for other wallets).
  app.get(`${ADMIN_API_PREFIX}/session`, { config: { auth: 'admin_session' } }, async (request) => {
    const session = sessionOf(request.webSession);
    return sessionView(session, await webRolesOf(db, config.adminWallets, session.walletAddress));
  });

  app.get(`${OPERATOR_API_PREFIX}/farms`, { config: { auth: 'operator_session' } }, async (request) => ({ data: (request.operatorFarms ?? []).map(farmView) }));

  // Dashboard only: the public Job resource has no per-state times (shared/src/dashboard/job-timeline.ts).
  app.get(`${base}/jobs/:id/timeline`, { config: { auth: 'session' } }, async (request) => {
    const job = await requireAccountJob(db, sessionOf(request.webSession).accountId, request.params);
    return jobTimeline(db, { job, chainId: config.chainId });
  });
};
