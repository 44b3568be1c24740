import type { IncomingMessage } from 'node:http';
import fastifyCookie from '@fastify/cookie';
import { MAX_BODY_BYTES } from '@gpufarm/shared';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import type { Chain, Client, Transport } from 'viem';
import { adminRoutes } from './admin/routes.js';
import { adminSessionRoutes } from './admin/session-routes.js';
import { DASHBOARD_API_PREFIX, enforceAuth, resolveCredentials } from './auth/plugin.js';
import { webCookies } from './auth/web-cookies.js';
import { agentDirectUploadRoutes } from './artifacts/agent-direct-upload.js';
import { agentArtifactRoutes } from './artifacts/agent-upload.js';
import type { BlobStore } from './artifacts/blob-store.js';
import { artifactRoutes } from './artifacts/routes.js';
import type { UrlSigner } from './artifacts/signing.js';
import { billingRoutes } from './billing/routes.js';
import { capacityRoutes } from './capacity/routes.js';
import type { OfferIndex } from './capacity/offer-index.js';
import { withoutSignature } from './artifacts/signing.js';
import type { Config } from './config.js';
import type { Database } from './db/database.js';
import { answerClientError, answerFrameworkError, MAX_PARAM_LENGTH, stampResponse } from './http/client-errors.js';
import { jobCanceled } from './execution/lifecycle.js';
import { connectionBudget } from './http/connection-budget.js';
import { installCors } from './http/cors.js';
import { installErrorHandling } from './http/error-handler.js';
import { installJsonBodies } from './http/json-body.js';
import { rateLimit } from './http/rate-limit.js';
import type { RateLimitStore } from './http/rate-limit-store.js';
import { clientRequestId, createRequestIdGenerator } from './http/request-id.js';
import { recordRoutes } from './http/route-table.js';
import './http/route-config.js';
import { indexRoutes } from './index-routes.js';
import { createLogger } from './logger.js';
import type { EscrowDeps } from './jobs/funding.js';
import { jobRoutes } from './jobs/routes.js';
import { logRoutes } from './logs/routes.js';
import { openApiRoutes } from './openapi/routes.js';
import { agentMachineRoutes } from './operator/agent-routes.js';
import { operatorRoutes } from './operator/routes.js';
import { appendServiceLine } from './logs/store.js';
import { createStreamSlots, DEFAULT_LOG_STREAM_OPTIONS, type LogStreamOptions } from './logs/stream.js';
import { pricingRoutes } from './pricing/routes.js';
import { s3PublicOrigin } from './artifacts/s3-blob-store.js';
import { offlineChainClient } from './chain/client.js';
import { healthRoutes } from './health/routes.js';
import { httpMetrics, metricsRoute } from './metrics/http.js';
import type { ControlPlaneMetrics } from './metrics/registry.js';
import { templateRoutes } from './templates/routes.js';
import { webRoutes } from './web/routes.js';
import { webStatic } from './web/static.js';

/** Everything the HTTP app needs, built once in `server.ts` (or a test) and passed in. */
export interface AppDeps {
  config: Config;
  db: Database;
  rateLimitStore: RateLimitStore;
  clientHashSalt: string;
  offerIndex: OfferIndex;
  /** The escrow deployment and its health probe; null or absent: funding is unavailable. */
  escrow?: EscrowDeps | null;
  /**
   * The server's pino logger (`createLogger`), which request lines and every loop's lines share;
   * false in tests (no request lines); absent: a new one at `config.logLevel`.
   */
  logger?: PinoLogger | false;
  /** Epoch milliseconds for rate-limit windows; tests pin it so a window cannot end mid-test. */
  now?: () => number;
  /** Where artifact bytes live and how their download URLs are signed. */
  artifacts: { blobs: BlobStore; signer: UrlSigner };
  /** The live log stream's heartbeat and caps (defaults, and the account cap from the config); tests shorten the heartbeat. */
  logStream?: Partial<LogStreamOptions>;
  /**
   * Checks dashboard sign-in signatures of contract wallets; default: the escrow's public client,
   * else a client without a chain (wallets that sign with a key still sign in).
   */
  chainClient?: Client<Transport, Chain>;
  /** The app's metrics: HTTP requests are counted in them, and `/metrics` serves them when `config.metrics.token` is set. */
  metrics?: ControlPlaneMetrics;
}

/** The control plane's fastify app: cross-cutting rules first, then each slice's routes. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const nextRequestId = createRequestIdGenerator();
  const root = deps.logger === false ? null : (deps.logger ?? createLogger({ level: config.logLevel }));
  // Addresses, hostnames and keys never reach the logs.
  const requestLog: FastifyBaseLogger | null =
    root?.child(
      {},
      {
        serializers: {
          req: (req: { method: string; url: string }) => ({ method: req.method, url: withoutSignature(req.url) }),
          res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
        },
      },
    ) ?? null;
  const app = Fastify({
    ...(requestLog ? { loggerInstance: requestLog } : { logger: false }),
    // A request's lines carry its id as `requestId`, the name the error envelope gives it.
    logController: new LogController({ requestIdLogLabel: 'requestId' }),
    // A head must arrive within headersTimeoutMs (checked every 5 s); bodies keep the rate floor
    // (`http/body-rate.ts`): a whole upload may take as long as it keeps moving.
    http: { headersTimeout: config.headersTimeoutMs, connectionsCheckingInterval: 5_000 },
    requestTimeout: 0,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: answerFrameworkError,
    clientErrorHandler: answerClientError,
    genReqId: () => nextRequestId(),
    childLoggerFactory: (logger, bindings, options, raw) => {
      const fromClient = clientRequestId(raw as IncomingMessage);
      return logger.child(fromClient ? { ...bindings, clientRequestId: fromClient } : bindings, options);
    },
    requestIdHeader: false,
    bodyLimit: MAX_BODY_BYTES,
    trustProxy: config.trustProxy,
  });

  app.decorate('nextRequestId', nextRequestId);
  const routes = recordRoutes(app);
  app.decorate('routeTable', routes);

  app.addHook('onRequest', async (request, reply) => stampResponse(request, reply));
  if (deps.metrics) await app.register(httpMetrics, { metrics: deps.metrics });
  installJsonBodies(app);
  installErrorHandling(app, routes);
  await app.register(connectionBudget, { maxConnections: config.maxConnections, agentReserved: config.agentReservedConnections });
  // Cookies are parsed only where they are a credential (`/dashboard/api`, see `auth/plugin.ts`).
  await app.register(fastifyCookie, { hook: false });
  await app.register(resolveCredentials, { db: deps.db, environment: config.environment, adminToken: config.adminToken, adminWallets: config.adminWallets, cookies: webCookies(config.publicUrl) });
  await app.register(rateLimit, { store: deps.rateLimitStore, clientHashSalt: deps.clientHashSalt, ...(deps.now ? { now: deps.now } : {}) });
  await app.register(enforceAuth, { adminWallets: config.adminWallets });
  installCors(app, routes);

  await app.register(openApiRoutes, { config });
  await app.register(healthRoutes, { db: deps.db, offerIndex: deps.offerIndex, escrow: deps.escrow ?? null });
  if (deps.metrics && config.metrics.token) await app.register(metricsRoute, { registry: deps.metrics.registry, token: config.metrics.token.reveal() });
  const effects = { serviceLine: appendServiceLine, canceledWhileMatching: (jobId: string) => jobCanceled(deps.db, jobId) };
  const artifactOptions = { db: deps.db, blobs: deps.artifacts.blobs, signer: deps.artifacts.signer, config: config.execution };
  const logStream: LogStreamOptions = { ...DEFAULT_LOG_STREAM_OPTIONS, maxPerAccount: config.accountLimits.logStreams, ...deps.logStream };
  const logStreamSlots = createStreamSlots(logStream);
  // The customer API: at /v1 with API keys, and the same handlers again under /dashboard/api
  // with the session (so the dashboard calls the very rules /v1 does).
  const customerRoutes: FastifyPluginAsync<{ signedFiles: boolean }> = async (scope, { signedFiles }) => {
    await scope.register(indexRoutes, { config, escrowAddress: deps.escrow?.chain.escrowAddress ?? null });
    await scope.register(capacityRoutes, { offerIndex: deps.offerIndex, chainId: config.chainId });
    await scope.register(pricingRoutes, { offerIndex: deps.offerIndex, config });
    await scope.register(jobRoutes, { db: deps.db, offerIndex: deps.offerIndex, config, escrow: deps.escrow ?? null, effects });
    await scope.register(logRoutes, { db: deps.db, stream: logStream, slots: logStreamSlots });
    await scope.register(artifactRoutes, { ...artifactOptions, signedFiles });
    await scope.register(billingRoutes, { db: deps.db });
    await scope.register(templateRoutes, { db: deps.db, config });
  };
  await app.register(customerRoutes, { signedFiles: true });
  await app.register(customerRoutes, { signedFiles: false, prefix: DASHBOARD_API_PREFIX });
  await app.register(agentArtifactRoutes, artifactOptions);
  // Its own plugin: the PUT's plugin takes raw bodies, these routes JSON.
  await app.register(agentDirectUploadRoutes, { db: deps.db, blobs: deps.artifacts.blobs, config: config.execution });
  await app.register(webRoutes, {
    db: deps.db,
    config,
    chainClient: deps.chainClient ?? deps.escrow?.chain.publicClient ?? offlineChainClient(config.chainId),
    signInLimits: { store: deps.rateLimitStore, clientHashSalt: deps.clientHashSalt },
    offerIndex: deps.offerIndex,
    blobs: deps.artifacts.blobs,
  });
  await app.register(adminSessionRoutes, { db: deps.db, escrow: deps.escrow ?? null, publicUrl: config.publicUrl, chainId: config.chainId, artifacts: deps.artifacts });
  await app.register(operatorRoutes, { db: deps.db, offerIndex: deps.offerIndex, config });
  await app.register(agentMachineRoutes, { db: deps.db, offerIndex: deps.offerIndex });
  await app.register(webStatic, { dir: config.web.dir, connectOrigins: config.execution.s3 ? [s3PublicOrigin(config.execution.s3)] : [] });
  if (config.adminToken) await app.register(adminRoutes, { db: deps.db, environment: config.environment, maxApiKeys: config.accountLimits.apiKeys });
  return app;
}
