import { randomBytes } from 'node:crypto';
import type { ApiKeyScope } from '@gpufarm/shared';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { keyEnvironmentFor } from '../../src/auth/api-keys.js';
import { createApiKey, setAccountStatus, type CreatedApiKey } from '../../src/auth/store.js';
import { createOfferIndex, type OfferIndex } from '../../src/capacity/offer-index.js';
import { loadConfig, type Config } from '../../src/config.js';
import type { Database } from '../../src/db/database.js';
import { createMemoryRateLimitStore, type RateLimitStore } from '../../src/http/rate-limit-store.js';
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
}

/**
 * The real app on a fresh PostgreSQL database (or the one given), for `app.inject()` tests.
 * `env` overrides configuration variables as the process environment would.
 */
export async function buildTestApp(t: TestContext, options: { env?: Record<string, string>; db?: Database; now?: () => number } = {}): Promise<TestApp> {
  const db = options.db ?? (await createPostgresTestDatabase(t)).db;
  const config = loadConfig({ GF_ADMIN_TOKEN: ADMIN_TOKEN, ...options.env });
  const rateLimitStore = createMemoryRateLimitStore();
  const offerIndex = createOfferIndex(db, { refreshMs: 60_000 });
  await offerIndex.start();
  const app = await buildApp({ config, db, rateLimitStore, clientHashSalt: 'test-salt', offerIndex, logger: false, ...(options.now ? { now: options.now } : {}) });
  t.teardown(async () => {
    await app.close();
    await offerIndex.close();
    await rateLimitStore.close();
  });
  return { app, db, config, offerIndex, rateLimitStore };
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
