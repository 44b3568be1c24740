import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import t from 'tap';
import { generateApiKey } from '../src/auth/api-keys.js';
import { openPostgres } from '../src/db/postgres.js';
import { buildApp } from '../src/app.js';
import { createFsBlobStore } from '../src/artifacts/fs-blob-store.js';
import { createUrlSigner } from '../src/artifacts/signing.js';
import { loadConfig } from '../src/config.js';
import { createMemoryRateLimitStore } from '../src/http/rate-limit-store.js';
import { createOfferIndex } from '../src/capacity/offer-index.js';
import { assertError } from './helpers/assert.js';
import { bearer, buildTestApp, createTestKey } from './helpers/app.js';
import { createPostgresTestDatabase, TEST_DATABASE_URL } from './helpers/database.js';

/** A port on which nothing listens: grab a free one and let it go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}

t.test('error: unavailable when the database cannot be reached', async (t) => {
  const db = openPostgres(`postgres://gpufarm:gpufarm@127.0.0.1:${await closedPort()}/none`);
  const offerIndex = createOfferIndex(db, { refreshMs: 60_000 });
  await offerIndex.start().catch(() => {});
  const rateLimitStore = createMemoryRateLimitStore();
  const config = loadConfig({});
  const artifactDir = mkdtempSync(join(tmpdir(), 'gf-unavailable-'));
  t.teardown(() => rmSync(artifactDir, { recursive: true, force: true }));
  const app = await buildApp({ config, db, rateLimitStore, clientHashSalt: 's', offerIndex, logger: false, artifacts: { blobs: createFsBlobStore(artifactDir), signer: createUrlSigner('unreachable-database', config.publicUrl) } });
  t.teardown(async () => {
    await app.close();
    await offerIndex.close();
    await rateLimitStore.close();
    await db.close();
  });
  const res = await app.inject({ url: '/v1/billing', headers: bearer(generateApiKey('test')) });
  assertError(t, res, 'unavailable', 503);
  t.notMatch(res.body, /ECONNREFUSED|127\.0\.0\.1/, 'no connection details leak');
  assertError(t, await app.inject({ url: '/v1/capacity' }), 'unavailable', 503);
  assertError(t, await app.inject({ url: '/v1/pricing' }), 'unavailable', 503);
  t.equal((await app.inject({ url: '/v1' })).statusCode, 200, 'the index needs no database');
});

t.test('error: unavailable when the database goes away under a running app', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const { app } = await buildTestApp(t, { db });
  const { key } = await createTestKey(db);
  t.equal((await app.inject({ url: '/v1/billing', headers: bearer(key) })).statusCode, 200);
  // The database disappears under the running app: its connections end, new ones are refused.
  const [{ name }] = (await db.query<{ name: string }>('SELECT current_database() AS name')) as [{ name: string }];
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
  await admin.end();
  const res = await app.inject({ url: '/v1/billing', headers: bearer(key) });
  assertError(t, res, 'unavailable', 503);
});
