import { randomBytes } from 'node:crypto';
import { API_KEY_SCOPES, ApiError, JOB_SUMMARIES_MAX, parseJobCreateRequest } from '@gpufarm/shared';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { Chain, Client, Transport } from 'viem';
import { z } from 'zod';
import { requireJobOutput, requireOutputFileList, sendOutputFile } from '../artifacts/output-files-routes.js';
import type { BlobStore } from '../artifacts/blob-store.js';
import { apiKeyParams, keyEnvironmentFor } from '../auth/api-keys.js';
import { ADMIN_API_PREFIX, DASHBOARD_API_PREFIX, OPERATOR_API_PREFIX } from '../auth/plugin.js';
import { webRolesOf, type OperatorFarm, type WebRoles } from '../auth/roles.js';
import { createWebSession, deleteWebSession, type WebSession } from '../auth/session-store.js';
import { cookieOf, hashCookieValue, webCookies } from '../auth/web-cookies.js';
import { createApiKey, ensureAccount, findApiKey, listApiKeys, revokeApiKey, type ApiKeySummary } from '../auth/store.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { intParam, parseBody, parseParams, parseQuery } from '../http/parse.js';
import type { RateLimitStore } from '../http/rate-limit-store.js';
import { requireAccountJob } from '../jobs/account-job.js';
import { withdrawalsOf } from '../jobs/deferred-payments.js';
import { disputeReasonBodySchema, recordDisputeReason } from '../jobs/dispute-reason.js';
import { jobFitNow, specFitNow } from '../jobs/fit-now.js';
import type { OfferIndex } from '../capacity/offer-index.js';
import { waitingForCustomer } from '../jobs/deferred-payments-store.js';
import { listJobSummaries } from '../jobs/store.js';
import { jobTimeline } from '../jobs/timeline.js';
import { jobIdSchema } from '../ids.js';
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

/** `GET /dashboard/api/keys`: a page of the account's keys, newest first (the /v1 list envelope). */
const keysQuerySchema = z.strictObject({ limit: intParam(1, 100, 20), cursor: z.string().max(200).optional() });
/** `ids`: the job ids of one page of the Jobs list, comma-separated. */
const summariesQuery = z.strictObject({
  ids: z
    .string()
    .transform((text) => text.split(','))
    .pipe(z.array(jobIdSchema).min(1).max(JOB_SUMMARIES_MAX, `must name at most ${JOB_SUMMARIES_MAX} jobs`)),
});
const keyCursorSchema = z.strictObject({ at: z.string().regex(/^\d{1,12}(\.\d{1,6})?$/), id: z.string().regex(/^key_[0-9a-z]{26}$/) });

/** A browser cookie as the nonce route makes it: 32 random bytes, base64url. */
const BROWSER_COOKIE = /^[A-Za-z0-9_-]{43}$/;

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
  config: Pick<Config, 'publicUrl' | 'chainId' | 'environment' | 'web' | 'adminWallets' | 'accountLimits'>;
  /** The chain's public client, for contract wallets' signatures. */
  chainClient: Client<Transport, Chain>;
  /** Where the budgets of contract-wallet checks are counted (the rate limits' store) and the salt that hashes client addresses. */
  signInLimits: { store: RateLimitStore; clientHashSalt: string };
  /** The offers, for whether a waiting job fits any of them now. */
  offerIndex: Pick<OfferIndex, 'summarizeFit'>;
  /** The artifact bytes, for one file out of a job's output tar. */
  blobs: BlobStore;
}

/**
 * The dashboard's own API under `/dashboard/api`: Sign-In with Ethereum sessions (nonce,
 * sign-in, session, sign-out), the account's API keys, a job's timeline, whether a job (or a spec
 * not created yet) fits a machine offered now, its output's file list and one file of it, a dispute's reason, and the payouts waiting for withdrawal. The `/v1` routes it also serves
 * there are the same plugins registered a second time (see `app.ts`).
 */
export const webRoutes: FastifyPluginAsync<WebRoutesOptions> = async (app, { db, config, chainClient, signInLimits, offerIndex, blobs }) => {
  const base = DASHBOARD_API_PREFIX;
  // The scheme of the public URL never changes after start (only a PORT=0 port is filled in).
  const cookies = webCookies(config.publicUrl);
  const signedOut = (reply: FastifyReply) => reply.clearCookie(cookies.session.name, cookies.session.options);
  const sessionOf = (session: WebSession | null): WebSession => {
    if (!session) throw new Error('a session route was reached without a session');
    return session;
  };

  // The nonce is bound to the browser that asks: its browser cookie (kept when it has a
  // well-formed one, so two tabs signing in at once both succeed).
  app.post(`${base}/auth/nonce`, { config: { auth: 'public' } }, async (request, reply) => {
    const held = cookieOf(app, request, cookies.browser);
    const browser = held !== null && BROWSER_COOKIE.test(held) ? held : randomBytes(32).toString('base64url');
    const nonce = newSiweNonce();
    const expiresAt = await insertSiweNonce(db, { nonce, browserHash: hashCookieValue(browser), ttlSeconds: NONCE_TTL_SECONDS });
    reply.setCookie(cookies.browser.name, browser, { ...cookies.browser.options, maxAge: NONCE_TTL_SECONDS });
    return reply.code(201).send({ nonce, expiresAt: expiresAt.toISOString() });
  });

  app.post(`${base}/auth/sign-in`, { config: { auth: 'public' } }, async (request, reply) => {
    const body = parseBody(signInBodySchema, request.body);
    const browser = cookieOf(app, request, cookies.browser);
    const signer = await checkSignIn(
      { db, wallets: { client: chainClient, limits: signInLimits } },
      {
        message: body.message,
        signature: body.signature,
        browserHash: browser === null ? null : hashCookieValue(browser),
        expected: { publicUrl: config.publicUrl, requestHost: request.host, chainId: config.chainId },
        clientAddress: request.ip,
      },
    );
    const account = await ensureAccount(db, signer.address);
    if (account.status === 'suspended') throw new ApiError('account_suspended');
    const { cookie, session } = await createWebSession(db, {
      accountId: account.id,
      walletAddress: signer.address,
      chainId: signer.chainId,
      ttlSeconds: config.web.sessionTtlSeconds,
      replacing: cookieOf(app, request, cookies.session),
      maxPerAccount: config.accountLimits.sessions,
    });
    reply.setCookie(cookies.session.name, cookie, { ...cookies.session.options, maxAge: config.web.sessionTtlSeconds });
    return sessionView(session, await webRolesOf(db, config.adminWallets, session.walletAddress));
  });

  // The pages' probe: 204 without a session (none, expired or ended), so a signed-out page logs no error.
  app.get(`${base}/auth/session`, { config: { auth: 'public' } }, async (request, reply) => {
    if (!request.webSession) return reply.code(204).send();
    const session = request.webSession;
    return sessionView(session, await webRolesOf(db, config.adminWallets, session.walletAddress));
  });

  app.post(`${base}/auth/sign-out`, { config: { auth: 'session' } }, async (request, reply) => {
    const cookie = cookieOf(app, request, cookies.session);
    if (cookie) await deleteWebSession(db, cookie);
    return signedOut(reply).code(204).send();
  });

  app.get(`${base}/keys`, { config: { auth: 'session' } }, async (request) => {
    const query = parseQuery(keysQuerySchema, request.query, `GET ${base}/keys`);
    const after = query.cursor ? decodeCursor(query.cursor, keyCursorSchema) : null;
    const keys = await listApiKeys(db, sessionOf(request.webSession).accountId, { after, limit: query.limit + 1 });
    const page = keys.slice(0, query.limit);
    const last = page.at(-1);
    return { object: 'list', data: page.map(apiKeyView), nextCursor: keys.length > query.limit && last ? encodeCursor(last.cursor) : null };
  });

  app.post(`${base}/keys`, { config: { auth: 'session' } }, async (request, reply) => {
    const body = parseBody(createKeyBodySchema, request.body);
    const session = sessionOf(request.webSession);
    const created = await createApiKey(db, {
      walletAddress: session.walletAddress,
      scopes: body.scopes,
      label: body.label ?? null,
      environment: keyEnvironmentFor(config.environment),
      maxActiveKeys: config.accountLimits.apiKeys,
    });
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

  // Dashboard only: title, image and creation time of a page of the Jobs list (the public Job has none of them).
  app.get(`${base}/jobs/summaries`, { config: { auth: 'session' } }, async (request) => {
    const { ids } = parseQuery(summariesQuery, request.query, `GET ${base}/jobs/summaries`);
    const rows = await listJobSummaries(db, sessionOf(request.webSession).accountId, ids);
    return { object: 'list', data: rows.map((r) => ({ jobId: r.id, title: r.title, image: r.image, createdAt: r.created_at.toISOString() })) };
  });

  // Dashboard only: whether a machine on the market fits the job now, and why not (the job page).
  app.get(`${base}/jobs/:id/fit`, { config: { auth: 'session' } }, async (request) => jobFitNow(offerIndex, await requireAccountJob(db, sessionOf(request.webSession).accountId, request.params)));

  // Dashboard only: the files of the output the job's result names, and one of them (the same
  // as GET /v1/artifacts/:id/files[/:index] on that artifact).
  app.get(`${base}/jobs/:id/output/files`, { config: { auth: 'session' } }, async (request, reply) => {
    const job = await requireAccountJob(db, sessionOf(request.webSession).accountId, request.params);
    reply.header('Cache-Control', 'no-store');
    return requireOutputFileList(db, await requireJobOutput(db, job));
  });
  app.get(`${base}/jobs/:id/output/files/:index`, { config: { auth: 'session', rateBucket: 'artifact_download' } }, async (request, reply) => {
    const job = await requireAccountJob(db, sessionOf(request.webSession).accountId, request.params);
    return sendOutputFile(reply, { db, blobs }, await requireJobOutput(db, job), request.params);
  });

  // Dashboard only: the same for the New job form's spec before it is created (checked as POST /v1/jobs checks it).
  app.post(`${base}/fit`, { config: { auth: 'session' } }, async (request) => {
    const parsed = parseJobCreateRequest(request.body);
    if (!parsed.ok) throw new ApiError('invalid_request', 'The job spec is not valid; see error.details.', { details: parsed.details });
    return specFitNow(offerIndex, parsed.value);
  });

  // Dashboard only: why the customer disputes the job, sent before the wallet's `dispute` call.
  app.post(`${base}/jobs/:id/dispute-reason`, { config: { auth: 'session' } }, async (request) => {
    const accountId = sessionOf(request.webSession).accountId;
    const job = await requireAccountJob(db, accountId, request.params);
    const body = parseBody(disputeReasonBodySchema, request.body);
    return recordDisputeReason(db, { accountId, jobId: job.id, ...body });
  });

  // Dashboard only: the account's shares of its jobs' releases that the escrow could not send
  // to its wallet, per (wallet, token); the wallet takes each with withdraw(token).
  app.get(`${base}/withdrawals`, { config: { auth: 'session' } }, async (request) => ({
    data: withdrawalsOf(await waitingForCustomer(db, sessionOf(request.webSession).accountId)),
  }));
};
