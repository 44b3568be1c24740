import { startMetricsListener } from '@gpufarm/shared/node';
import type { FastifyInstance } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import { buildApp } from './app.js';
import { connectChain } from './chain/client.js';
import { startChainHealth } from './chain/health.js';
import { createOfferIndex, type OfferIndex } from './capacity/offer-index.js';
import { defaultPublicUrl, type Config } from './config.js';
import { createLogger, silentLogger, type Logger } from './logger.js';
import type { Database } from './db/database.js';
import { migrate, MigrationsPendingError, pendingMigrations } from './db/migrate.js';
import { openDatabase } from './db/open.js';
import { syncCatalog } from './fleet/store.js';
import { connectRedisRateLimitStore } from './http/rate-limit-redis-store.js';
import { createMemoryRateLimitStore } from './http/rate-limit-store.js';
import { startEscrowWorker } from './jobs/escrow-worker.js';
import { expireUnfunded } from './jobs/expiry.js';
import { appendServiceLine } from './logs/store.js';
import type { EscrowDeps } from './jobs/funding.js';
import { removeLocalState, writeLocalState } from './local-state.js';
import { deploymentSecret } from './settings/store.js';
import { createAgentGateway } from './agent-gateway/gateway.js';
import { sweepAbandonedUploads } from './artifacts/agent-direct-upload.js';
import { sweepExpiredArtifacts } from './artifacts/expiry.js';
import { openBlobStore } from './artifacts/open-blob-store.js';
import { agentInputUrl } from './artifacts/agent-upload.js';
import { resolveJobInputs } from './artifacts/inputs.js';
import { createUrlSigner } from './artifacts/signing.js';
import type { ExecutionDeps } from './execution/deps.js';
import { executionLifecycle } from './execution/lifecycle.js';
import { startExecutionWorker } from './execution/worker.js';
import { sweepDrainDeadlines } from './execution/drain-deadlines.js';
import { sweepOldFleetEvents } from './fleet/events.js';
import { GpuSampleAggregator, startHistoryLoop } from './fleet/history.js';
import { startLogPartitionLoop } from './logs/partitions.js';
import { startMatcher } from './matching/loop.js';
import { deleteExpiredWebSessions } from './auth/session-store.js';
import { deleteExpiredSiweNonces } from './web/store.js';
import { createQueueFigures } from './matching/queue-figures.js';
import { meteredBlobStore } from './metrics/blob-meter.js';
import { createControlPlaneMetrics } from './metrics/registry.js';

export interface ControlPlane {
  app: FastifyInstance;
  db: Database;
  offerIndex: OfferIndex;
  /** The escrow deployment, when configured. */
  escrow: EscrowDeps | null;
  /** Where it listens, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** Where `GF_METRICS_LISTEN` serves `/metrics`, e.g. `http://127.0.0.1:9469`; null when off. */
  metricsUrl: string | null;
  close(): Promise<void>;
}

/**
 * Wires the control plane once: database (migrated when `migrateOnStart`, else checked to be; catalog synced), rate-limit store, offer
 * index, HTTP app; then listens. Everything opened here is closed by `close()`, and by a start
 * that fails part way, so a failed start leaves no timer, loop or connection behind.
 */
export async function startControlPlane(
  config: Config,
  options: {
    /** false: no log lines (tests); a pino logger: the lines go there; default: JSON lines on stdout at `config.logLevel`. */
    logger?: boolean | PinoLogger;
    /** How often a slow start says where it waits (10 s). */
    slowStartMs?: number;
  } = {},
): Promise<ControlPlane> {
  // What builds links (the app, the URL signer, the matcher's input routes) reads `publicUrl`
  // from this copy each time: with PORT=0 and no GF_PUBLIC_URL it gets the bound port after listen.
  const served: Config = { ...config };
  // One logger for the requests (fastify's `loggerInstance`) and every loop, each a child of it.
  const root: PinoLogger | null = options.logger === false ? null : options.logger === true || options.logger === undefined ? createLogger({ level: config.logLevel }) : options.logger;
  const log: Logger = root ?? silentLogger;
  // A start that takes long says which step it waits on.
  let startStep = 'opening the database';
  const startedAt = Date.now();
  const slowStart = setInterval(() => {
    const waitedS = Math.round((Date.now() - startedAt) / 1000);
    log.warn({ component: 'start', step: startStep, waitedS }, `gpufarm control plane: starting, still ${startStep} after ${waitedS} s`);
  }, options.slowStartMs ?? 10_000);
  slowStart.unref();
  let db: Awaited<ReturnType<typeof openDatabase>>;
  try {
    db = await openDatabase(config);
  } catch (err) {
    clearInterval(slowStart);
    throw err;
  }
  let wroteLocalState = false;
  // What is open so far, closed last-opened first; the local state goes with the database it names.
  const opened: Array<{ name: string; close: () => unknown }> = [
    {
      name: 'database',
      close: async () => {
        await db.close();
        if (wroteLocalState) removeLocalState(config.dataDir);
      },
    },
  ];
  // A step that takes long to close says which it is: `docker stop` kills after 10 s.
  const closeOpened = async () => {
    for (let step = opened.pop(); step; step = opened.pop()) {
      const began = Date.now();
      const slow = setTimeout(() => log.warn({ component: step.name }, `closing: still closing the ${step.name} after 2 s`), 2_000);
      try {
        await step.close();
      } finally {
        clearTimeout(slow);
      }
      const took = Date.now() - began;
      if (took >= 2_000) log.warn({ component: step.name, tookMs: took }, `closing: the ${step.name} took ${took} ms to close`);
    }
  };
  let app: FastifyInstance | undefined;
  try {
    startStep = 'applying the migrations';
    if (config.migrateOnStart) await migrate(db);
    else {
      const pending = await pendingMigrations(db);
      if (pending.length > 0) throw new MigrationsPendingError(pending);
    }
    startStep = 'syncing the GPU catalog';
    await syncCatalog(db);
    const redisLog = log.child({ component: 'rate-limit store' });
    startStep = 'connecting the rate-limit store';
    const rateLimitStore =
      config.rateLimitStore === 'redis' && config.redisUrl
        ? await connectRedisRateLimitStore({ url: config.redisUrl.reveal(), onConnectionChange: (change) => (change.up ? redisLog.info(change.message) : redisLog.warn({ err: change.err }, change.message)) })
        : createMemoryRateLimitStore();
    opened.push({ name: 'rate-limit store', close: () => rateLimitStore.close() });
    const clientHashSalt = await deploymentSecret(db, 'client_hash_salt');
    const queue = createQueueFigures(db);
    const offerIndex = createOfferIndex(db, { log, refreshMs: config.offerIndexRefreshMs, queuedByClass: queue.queuedByClass, allowSimulated: config.execution.allowSimulatedMachines });
    opened.push({ name: 'offer index', close: () => offerIndex.close() });
    startStep = 'loading the offer index';
    await offerIndex.start();
    const metrics = createControlPlaneMetrics();
    const store = openBlobStore(config.execution);
    opened.push({ name: 'artifact store', close: () => store.close() });
    const blobs = meteredBlobStore(store.blobs, metrics.artifactBytes);
    const signer = createUrlSigner(await deploymentSecret(db, 'artifact_url_key'), () => served.publicUrl);
    let escrow: EscrowDeps | null = null;
    if (config.chain) {
      const chain = connectChain({
        rpcUrl: config.chain.rpcUrl,
        chainId: config.chainId,
        escrowAddress: config.chain.escrowAddress,
        operatorPrivateKey: (config.chain.operatorKey?.reveal() ?? null) as `0x${string}` | null,
        confirmations: config.chain.confirmations,
      });
      startStep = "reaching the chain's RPC";
      const health = await startChainHealth(chain, { intervalMs: config.chain.healthIntervalMs });
      opened.push({ name: 'chain health loop', close: () => health.close() });
      escrow = { chain, health };
    }
    startStep = 'building the HTTP app';
    const built = await buildApp({ config: served, db, rateLimitStore, clientHashSalt, offerIndex, escrow, logger: root ?? false, artifacts: { blobs, signer }, metrics });
    app = built;
    app.addHook('onClose', closeOpened);
    if (!config.execution.canaryImage) {
      app.log.warn(
        'GF_CANARY_IMAGE is not set: no job reaches RESULT_VERIFIED, as the service recomputes the result of its canary image only (machines are still verified by the GPU challenge). ' +
          'Set it to the canary image pinned by digest (repository@sha256:…, built by scripts/build-images.sh); GET /v1 shows canary: null until then.',
      );
    }
    const execution: ExecutionDeps = { db, escrow, config: config.execution, blobs, log, metrics };
    const gpuSamples = new GpuSampleAggregator();
    startStep = 'starting the agent gateway';
    const gateway = await createAgentGateway({
      app,
      deps: { ...execution, metrics },
      lifecycle: executionLifecycle(execution),
      gpuSamples: (machineId, gpus) => gpuSamples.add(machineId, gpus, Date.now()),
    });
    opened.push({ name: 'agent gateway', close: () => gateway.close() });
    metrics.attach({ db, escrow, escrowStartBlock: config.chain?.startBlock ?? 0, agentLinks: () => gateway.connectedMachines() });
    const history = startHistoryLoop({ db, aggregator: gpuSamples, log });
    // The sums heard since the last pass are written at shutdown (the database closes after).
    opened.push({ name: 'history loop', close: () => history.close().then(() => gpuSamples.flush(db)) });
    if (config.execution.runMatcher) {
      const matcher = startMatcher(
        { db, log, resolveInputs: (tx, job, inputs) => resolveJobInputs(tx, (mountName) => agentInputUrl(served.publicUrl, job.assignmentId, mountName), job.accountId, inputs) },
        { intervalMs: config.execution.matchIntervalMs, queue, metrics: metrics.matcher, allowSimulated: config.execution.allowSimulatedMachines },
      );
      opened.push({ name: 'matcher', close: () => matcher.close() });
    }
    const executionWorker = startExecutionWorker(execution, {
      intervalMs: config.execution.sweepIntervalMs,
      sweeps: [
        { name: 'artifact expiry', run: () => sweepExpiredArtifacts({ db, blobs }) },
        { name: 'abandoned artifact uploads', run: () => sweepAbandonedUploads({ db, blobs }) },
        { name: 'expired dashboard sessions', run: () => deleteExpiredWebSessions(db) },
        { name: 'drain deadlines', run: () => sweepDrainDeadlines(execution) },
        { name: 'fleet event retention', run: () => sweepOldFleetEvents(db) },
        { name: 'expired sign-in nonces', run: () => deleteExpiredSiweNonces(db) },
        { name: 'unfunded job expiry', run: () => expireUnfunded({ db, effects: { serviceLine: appendServiceLine } }, { ttlSeconds: config.unfundedJobTtlSeconds }) },
      ],
    });
    opened.push({ name: 'execution worker', close: () => executionWorker.close() });
    const logPartitions = startLogPartitionLoop({ db, log }, { retentionDays: config.execution.logRetentionDays });
    opened.push({ name: 'log partition loop', close: () => logPartitions.close() });
    const worker = escrow
      ? startEscrowWorker(
          { db, escrow, startBlock: config.chain?.startBlock ?? 0, refundGraceMs: 60_000, log },
          { intervalMs: config.chain?.sweepIntervalMs ?? 5_000 },
        )
      : null;
    if (worker) opened.push({ name: 'escrow worker', close: () => worker.close() });
    let metricsUrl: string | null = null;
    if (config.metrics.listen) {
      const listener = await startMetricsListener(metrics.registry, config.metrics.listen);
      opened.push({ name: 'metrics listener', close: () => listener.close() });
      metricsUrl = listener.url;
      app.log.info({ component: 'metrics listener', url: `${metricsUrl}/metrics` }, `metrics: ${metricsUrl}/metrics`);
    }
    startStep = `listening on ${config.host}:${config.port}`;
    await app.listen({ port: config.port, host: config.host });
    clearInterval(slowStart);
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
    if (config.publicUrlFollowsPort) served.publicUrl = defaultPublicUrl(config.host, port);
    if (db.kind === 'pglite') {
      writeLocalState(config.dataDir, { pid: process.pid, url, adminToken: config.adminToken ?? null });
      wroteLocalState = true;
    }
    return { app, db, offerIndex, escrow, url, metricsUrl, close: () => built.close() };
  } catch (err) {
    clearInterval(slowStart);
    // The app's onClose runs closeOpened; before the app exists, nothing else would.
    await app?.close().catch(() => {});
    await closeOpened().catch(() => {});
    throw err;
  }
}

/** Closes the control plane on SIGINT or SIGTERM, then `after` (e.g. a local chain), then exits 0. */
export function closeOnSignals(controlPlane: ControlPlane, after?: () => Promise<void>): void {
  const stop = async (signal: NodeJS.Signals) => {
    const log = controlPlane.app.log;
    log.info({ signal }, `${signal}: closing`);
    try {
      await controlPlane.close();
      await after?.();
    } catch (err) {
      log.error({ signal, err }, `${signal}: closing failed; exiting 1`);
      process.exit(1);
    }
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
