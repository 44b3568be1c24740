import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ApiKeyScope } from '@gpufarm/shared';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import type { BlobStore } from '../../src/artifacts/blob-store.js';
import { openBlobStore } from '../../src/artifacts/open-blob-store.js';
import { createUrlSigner, type UrlSigner } from '../../src/artifacts/signing.js';
import { deploymentSecret } from '../../src/settings/store.js';
import { keyEnvironmentFor } from '../../src/auth/api-keys.js';
import { createApiKey, setAccountStatus, type CreatedApiKey } from '../../src/auth/store.js';
import { createOfferIndex, type OfferIndex } from '../../src/capacity/offer-index.js';
import { loadConfig, type Config } from '../../src/config.js';
import type { Database } from '../../src/db/database.js';
import { createFarm, createMachine } from '../../src/testing/factories.js';
import type { LogStreamOptions } from '../../src/logs/stream.js';
import type { ControlPlaneMetrics } from '../../src/metrics/registry.js';
import { createMemoryRateLimitStore, type RateLimitStore } from '../../src/http/rate-limit-store.js';
import { openPostgres } from '../../src/db/postgres.js';
import { createFsBlobStore } from '../../src/artifacts/fs-blob-store.js';
import { createPostgresTestDatabase } from './database.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef0123456789';

interface TestContext {
  teardown(fn: () => unknown): void;
}

export interface TestApp {
  app: FastifyInstance;
  db: Database;
  config: Config;
  offerIndex: OfferIndex;
  rateLimitStore: RateLimitStore;
  blobs: BlobStore;
  signer: UrlSigner;
}

/**
 * The real app on a fresh PostgreSQL database (or the one given), for `app.inject()` tests.
 * `env` overrides configuration variables as the process environment would; `rateLimitStore`
 * replaces the memory store (closed at teardown either way).
 */
export async function buildTestApp(
  t: TestContext,
  options: { env?: Record<string, string>; db?: Database; now?: () => number; logStream?: Partial<LogStreamOptions>; metrics?: ControlPlaneMetrics; rateLimitStore?: RateLimitStore } = {},
): Promise<TestApp> {
  const db = options.db ?? (await createPostgresTestDatabase(t)).db;
  const config = loadConfig({ GF_ADMIN_TOKEN: ADMIN_TOKEN, ...options.env });
  const rateLimitStore = options.rateLimitStore ?? createMemoryRateLimitStore();
  const offerIndex = createOfferIndex(db, { refreshMs: 60_000, allowSimulated: config.execution.allowSimulatedMachines });
  await offerIndex.start();
  const artifacts = await testArtifacts(t, db, config);
  const app = await buildApp({ config, db, rateLimitStore, clientHashSalt: 'test-salt', offerIndex, logger: false, artifacts, ...(options.now ? { now: options.now } : {}), ...(options.logStream ? { logStream: options.logStream } : {}), ...(options.metrics ? { metrics: options.metrics } : {}) });
  t.teardown(async () => {
    await app.close();
    await offerIndex.close();
    await rateLimitStore.close();
  });
  return { app, db, config, offerIndex, rateLimitStore, ...artifacts };
}

/** A port on which nothing listens: grab a free one and let it go. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** The real app on a PostgreSQL address where nothing listens: every query fails, the offer index never loads. */
export async function buildUnreachableDatabaseApp(t: TestContext): Promise<{ app: FastifyInstance }> {
  const db = openPostgres(`postgres://gpufarm:gpufarm@127.0.0.1:${await closedPort()}/none`);
  const offerIndex = createOfferIndex(db, { refreshMs: 60_000 });
  await offerIndex.start().catch(() => {});
  const rateLimitStore = createMemoryRateLimitStore();
  const config = loadConfig({});
  const artifactDir = mkdtempSync(join(tmpdir(), 'gf-unreachable-'));
  const app = await buildApp({ config, db, rateLimitStore, clientHashSalt: 's', offerIndex, logger: false, artifacts: { blobs: createFsBlobStore(artifactDir), signer: createUrlSigner('unreachable-database', config.publicUrl) } });
  t.teardown(async () => {
    await app.close();
    await offerIndex.close();
    await rateLimitStore.close();
    await db.close();
    rmSync(artifactDir, { recursive: true, force: true });
  });
  return { app };
}

/**
 * The artifact store and URL signer as `server.ts` makes them: the S3 store when the test sets
 * `GF_ARTIFACT_STORE=s3`, else the filesystem store in `GF_ARTIFACT_DIR` when the test sets it,
 * else in a temporary directory removed afterwards.
 */
export async function testArtifacts(t: TestContext, db: Database, config: Config): Promise<{ blobs: BlobStore; signer: UrlSigner }> {
  let dir = config.execution.artifactDir;
  if (!config.execution.s3 && dir === `${config.dataDir}/artifacts`) {
    const tmp = mkdtempSync(join(tmpdir(), 'gf-test-artifacts-'));
    t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
    dir = tmp;
  }
  const store = openBlobStore({ artifactDir: dir, s3: config.execution.s3 });
  t.teardown(() => store.close());
  return { blobs: store.blobs, signer: createUrlSigner(await deploymentSecret(db, 'artifact_url_key'), config.publicUrl) };
}

/** A fresh account with one key; `status: 'suspended'` suspends the account afterwards. */
export async function createTestKey(
  db: Database,
  options: { scopes?: ApiKeyScope[]; environment?: Config['environment']; status?: 'active' | 'suspended'; walletAddress?: string } = {},
): Promise<CreatedApiKey> {
  const walletAddress = options.walletAddress ?? `0x${randomBytes(20).toString('hex')}`;
  const created = await createApiKey(db, {
    walletAddress,
    scopes: options.scopes ?? ['jobs:create', 'jobs:read', 'artifacts:read', 'billing:read'],
    environment: keyEnvironmentFor(options.environment ?? 'local'),
  });
  if (options.status === 'suspended') await setAccountStatus(db, created.accountId, 'suspended');
  return created;
}

export function bearer(key: string): { authorization: string } {
  return { authorization: `Bearer ${key}` };
}

/** A fleet of one machine that can run it, and a job created on it through `POST /v1/jobs` with `key`; returns the job id. */
export async function createOfferedJob(test: TestApp, key: string): Promise<string> {
  const farm = await createFarm(test.db, { slug: 'log-farm' });
  await createMachine(test.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await test.offerIndex.refresh();
  const created = await test.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/job:1', gpu: { count: 1 } } });
  if (created.statusCode !== 201) throw new Error(`job creation answered ${created.statusCode}: ${created.body}`);
  return created.json().job.id as string;
}
