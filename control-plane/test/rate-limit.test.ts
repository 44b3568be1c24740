import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import Fastify from 'fastify';
import { rateLimit } from '../src/http/rate-limit.js';
import { connectRedisRateLimitStore } from '../src/http/rate-limit-redis-store.js';
import { createMemoryRateLimitStore, type RateLimitStore } from '../src/http/rate-limit-store.js';
import { startRedisServer } from '../src/testing/redis-server.js';
import '../src/http/route-config.js';
import { installErrorHandling } from '../src/http/error-handler.js';
import { recordRoutes } from '../src/http/route-table.js';
import { assertError } from './helpers/assert.js';
import { loadConfig } from '../src/config.js';
import { startControlPlane } from '../src/server.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { bearer, buildTestApp, createTestKey } from './helpers/app.js';
import { startTestRedis } from './helpers/redis.js';

/** 10 s into a 60 s window: pinned, so a window cannot end in the middle of a test. */
const MID_WINDOW = () => 1_700_000_010_000;

/** Each store the server can run with; the behaviour tests run on every one. */
const STORES: Array<[name: string, open: (t: Test) => Promise<RateLimitStore>]> = [
  ['memory', async () => createMemoryRateLimitStore()],
  ['Redis', async (t) => connectRedisRateLimitStore({ url: (await startTestRedis(t)).url })],
];

for (const [name, open] of STORES) {
  t.test(`anonymous public calls: 60 per minute per address, then 429 with Retry-After (${name} store)`, async (t) => {
    const { app } = await buildTestApp(t, { now: MID_WINDOW, rateLimitStore: await open(t) });
    for (let i = 1; i <= 60; i++) {
      const res = await app.inject({ url: '/v1/pricing', remoteAddress: '203.0.113.7' });
      if (res.statusCode !== 200) t.fail(`call ${i} got ${res.statusCode}`);
      if (i === 1) {
        t.equal(res.headers['x-ratelimit-limit'], '60');
        t.equal(res.headers['x-ratelimit-remaining'], '59');
        t.equal(res.headers['x-ratelimit-reset'], '30', 'seconds until the window ends');
      }
    }
    const limited = await app.inject({ url: '/v1/pricing', remoteAddress: '203.0.113.7' });
    assertError(t, limited, 'rate_limited', 429);
    t.equal(limited.headers['retry-after'], '30', 'Retry-After in seconds');
    t.equal(limited.headers['x-ratelimit-remaining'], '0');
    const elsewhere = await app.inject({ url: '/v1/pricing', remoteAddress: '203.0.113.8' });
    t.equal(elsewhere.statusCode, 200, 'another address has its own bucket');
  });

  t.test(`per key: 300 per minute on any endpoint, counted per key (${name} store)`, async (t) => {
    const { app, db } = await buildTestApp(t, { now: MID_WINDOW, rateLimitStore: await open(t) });
    const { key } = await createTestKey(db);
    const other = await createTestKey(db);
    let last;
    for (let i = 1; i <= 300; i++) {
      last = await app.inject({ url: i % 2 ? '/v1/billing' : '/v1/capacity', headers: bearer(key), remoteAddress: `198.51.100.${i % 250}` });
      if (last.statusCode !== 200) t.fail(`call ${i} got ${last.statusCode}`);
    }
    t.equal(last?.headers['x-ratelimit-limit'], '300');
    t.equal(last?.headers['x-ratelimit-remaining'], '0');
    assertError(t, await app.inject({ url: '/v1/billing', headers: bearer(key) }), 'rate_limited', 429);
    t.equal((await app.inject({ url: '/v1/billing', headers: bearer(other.key) })).statusCode, 200);
  });

  t.test(`route buckets (jobs_create 30/min) bind before the per-key limit (${name} store)`, async (t) => {
    const app = Fastify();
    const store = await open(t);
    t.teardown(async () => {
      await app.close();
      await store.close();
    });
    installErrorHandling(app, recordRoutes(app));
    app.decorateRequest('principal', null);
    app.addHook('onRequest', async (request) => {
      request.principal = { keyId: String(request.headers['x-key']), apiKeyId: null, accountId: 'a', walletAddress: '0x', scopes: [] };
    });
    await app.register(rateLimit, { store, clientHashSalt: 's', now: MID_WINDOW });
    app.post('/jobs', { config: { rateBucket: 'jobs_create' } }, async () => ({ ok: true }));
    app.get('/read', async () => ({ ok: true }));
    for (let i = 0; i < 30; i++) t.equal((await app.inject({ method: 'POST', url: '/jobs', headers: { 'x-key': 'k1' } })).statusCode, 200);
    const first = await app.inject({ method: 'POST', url: '/jobs', headers: { 'x-key': 'k2' } });
    t.equal(first.headers['x-ratelimit-limit'], '30', 'the tighter bucket sets the headers');
    const limited = await app.inject({ method: 'POST', url: '/jobs', headers: { 'x-key': 'k1' } });
    t.equal(limited.statusCode, 429);
    t.equal(limited.json().error.code, 'rate_limited');
    t.match(limited.json().error.message, /30 per 60 s/);
    const read = await app.inject({ url: '/read', headers: { 'x-key': 'k1' } });
    t.equal(read.statusCode, 200);
    t.equal(read.headers['x-ratelimit-limit'], '300');
    t.equal(read.headers['x-ratelimit-remaining'], String(300 - 32), 'every call counted in the per-key bucket');
  });
}

async function storeContract(t: Test, store: RateLimitStore) {
  const windowMs = 60_000;
  const now = 1_700_000_010_000;
  t.same(await store.hit(['a'], windowMs, now), [{ hits: 1, resetAt: 1_700_000_040_000 }]);
  t.same(await store.hit(['a'], windowMs, now + 1), [{ hits: 2, resetAt: 1_700_000_040_000 }]);
  t.same(await store.hit(['b'], windowMs, now), [{ hits: 1, resetAt: 1_700_000_040_000 }], 'keys are separate');
  t.same(await store.hit(['a'], windowMs, now + 30_000), [{ hits: 1, resetAt: 1_700_000_100_000 }], 'a new window starts at zero');
  t.same(
    (await store.hit(['z', 'a', 'b'], windowMs, now)).map((r) => r.hits),
    [1, 3, 2],
    'several keys at once: each counted, answered in the order asked',
  );
  const concurrent = await Promise.all(Array.from({ length: 50 }, (_, i) => store.hit(i % 2 ? ['c', 'd'] : ['d', 'c'], windowMs, now)));
  // Two keys, 50 hits each, asked in either order: each count from 1 to 50 comes once per key.
  t.same(concurrent.flat().map((r) => r.hits).sort((x, y) => x - y), Array.from({ length: 100 }, (_, i) => Math.floor(i / 2) + 1), 'concurrent hits are each counted once, whatever the order of the keys');
}

t.test('behavior: the memory store drops a window when it ended by the clock its hits are counted on, not the wall clock', async (t) => {
  const store = createMemoryRateLimitStore({ sweepMs: 5 });
  t.teardown(() => store.close());
  const sweeps = () => new Promise((resolve) => setTimeout(resolve, 40));
  const windowMs = 60_000;
  const now = 1_700_000_010_000;
  t.equal((await store.hit(['a'], windowMs, now))[0]?.hits, 1);
  await sweeps();
  t.equal((await store.hit(['a'], windowMs, now + 1))[0]?.hits, 2, 'a pinned clock years behind the wall clock keeps its count across sweeps');
  await store.hit(['b'], windowMs, now + windowMs);
  await sweeps();
  t.equal((await store.hit(['a'], windowMs, now + 2))[0]?.hits, 1, "once the hits' clock passed the window's end, the window is dropped");
});

for (const [name, open] of STORES) {
  t.test(`store contract: ${name}`, async (t) => {
    const store = await open(t);
    t.teardown(() => store.close());
    await storeContract(t, store);
  });
}

t.test('default: two replicas on one Redis share an address\'s bucket', async (t) => {
  const { url } = await createPostgresTestDatabase(t);
  const redis = await startTestRedis(t);
  const start = async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gf-replica-'));
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
    // No GF_RATE_LIMIT_STORE: with GF_REDIS_URL the default is the shared store.
    const replica = await startControlPlane(loadConfig({ DATABASE_URL: url!, PORT: '0', GF_DATA_DIR: dataDir, GF_REDIS_URL: redis.url }), { logger: false });
    t.teardown(() => replica.close());
    return replica.url;
  };
  const replicas = [await start(), await start()];
  const call = (i: number) => fetch(`${replicas[i % 2]}/v1/pricing`);
  // A window that ends mid-test would start the count again: begin in a fresh one.
  const reset = Number((await call(0)).headers.get('x-ratelimit-reset'));
  if (reset < 10) await new Promise((resolve) => setTimeout(resolve, (reset + 1) * 1000));
  const first = await call(0);
  const used = 60 - Number(first.headers.get('x-ratelimit-remaining'));
  for (let i = used; i < 60; i++) {
    const res = await call(i);
    if (res.status !== 200) t.fail(`call ${i + 1} got ${res.status}`);
  }
  const limited = [await call(0), await call(1)];
  t.same(limited.map((r) => r.status), [429, 429], 'the 61st call of the minute is limited on either replica');
  t.equal(first.headers.get('x-ratelimit-limit'), '60');
});

t.test('behavior: while Redis does not answer, each process counts in memory; then shared again', async (t) => {
  const redis = await startTestRedis(t);
  const changes: Array<{ up: boolean; message: string }> = [];
  const store = await connectRedisRateLimitStore({ url: redis.url, onConnectionChange: ({ up, message }) => changes.push({ up, message }) });
  const { app } = await buildTestApp(t, { now: MID_WINDOW, rateLimitStore: store });
  const call = () => app.inject({ url: '/v1/pricing', remoteAddress: '203.0.113.9' });
  for (let i = 0; i < 10; i++) await call();
  t.equal((await call()).headers['x-ratelimit-remaining'], '49', 'counted in Redis');

  await redis.stop();
  const during = await call();
  t.equal(during.statusCode, 200, 'served while Redis is away');
  t.equal(during.headers['x-ratelimit-remaining'], '59', "this process's own count, from its first call without Redis");
  for (let i = 0; i < 59; i++) await call();
  assertError(t, await call(), 'rate_limited', 429);
  t.match(changes, [{ up: false, message: /Redis at redis:\/\/127\.0\.0\.1:\d+ does not answer; each replica counts its own limits in memory/ }]);

  // The same address again: the client reconnects on its own and the count in Redis goes on.
  const again = await startRedisServer({ port: redis.port });
  t.teardown(() => again.stop());
  const deadline = Date.now() + 15_000;
  while (!changes.some((c) => c.up) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  t.match(changes.at(-1), { up: true, message: /answers again/ });
  t.equal((await call()).headers['x-ratelimit-remaining'], '59', 'a fresh Redis: its first count of the window');
});

t.test('error: a start with GF_REDIS_URL where nothing answers names the setting', async (t) => {
  const redis = await startTestRedis(t);
  await redis.stop();
  const failed = await connectRedisRateLimitStore({ url: `redis://:hunter2@127.0.0.1:${redis.port}` }).then(
    () => null,
    (err: unknown) => err as Error,
  );
  t.match(failed?.message, new RegExp(`^GF_REDIS_URL: Redis does not answer at redis://127\\.0\\.0\\.1:${redis.port} `));
  t.notMatch(failed?.message, /hunter2/, 'the password stays out of the message');
});
