import { createServer } from 'node:http';
import t from 'tap';
import { buildTestApp, createTestKey } from '@gpufarm/control-plane/testing/app';
import { backoffMs, createClient, retryAfterMs, type RequestEvent } from '../src/index.js';
import { freePort } from '@gpufarm/shared/node';
import { failure, listening } from './helpers/control-plane.js';
import { frontOf } from './helpers/front.js';

const SPEC = { image: 'ghcr.io/acme/job:1', gpu: { count: 1 }, maxPricePerGpuHour: '2' };

interface Teardown {
  teardown(fn: () => unknown): void;
}

async function controlPlane(t: Teardown) {
  const s = await listening((env) => buildTestApp(t, { env }));
  const { key, accountId } = await createTestKey(s.db);
  const jobCount = async () => (await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM jobs WHERE account_id = $1', [accountId]))[0]!.n;
  return { ...s, key, jobCount };
}

t.test('behavior: a creation answered 429 (Retry-After: 1), then 503, is retried with the same Idempotency-Key and makes one job', async (t) => {
  const cp = await controlPlane(t);
  const front = await frontOf(t, cp.baseUrl, [429, 'forward-then-503', 'forward'], { 'retry-after': '1' });
  const events: RequestEvent[] = [];
  const gf = createClient({ baseUrl: front.baseUrl, apiKey: cp.key, onRequest: (e) => events.push(e) });
  const created = await gf.jobs.create(SPEC);
  t.equal(front.seen.length, 3, 'three tries');
  const keys = new Set(front.seen.map((s) => s.idempotencyKey));
  t.equal(keys.size, 1, 'one Idempotency-Key on every try');
  t.match([...keys][0], /^[\x21-\x7e]{1,255}$/, 'in the server’s accepted form');
  t.ok(front.seen[1]!.at - front.seen[0]!.at >= 1000, 'waited the Retry-After second');
  t.equal(created.idempotentReplay, true, 'the third try answered the job the second one made');
  t.equal(await cp.jobCount(), 1, 'exactly one job');
  t.same(events.map((e) => e.status), [429, 503, 200], 'onRequest reported each try');
  t.same(events.map((e) => e.attempt), [0, 1, 2]);
});

t.test('behavior: a creation answered 429 then 503 then 201 makes one job', async (t) => {
  const cp = await controlPlane(t);
  const front = await frontOf(t, cp.baseUrl, [429, 503, 'forward'], { 'retry-after': '1' });
  const created = await createClient({ baseUrl: front.baseUrl, apiKey: cp.key }).jobs.create(SPEC, { idempotencyKey: 'my-key-1' });
  t.equal(created.idempotentReplay, false);
  t.same(front.seen.map((s) => s.idempotencyKey), ['my-key-1', 'my-key-1', 'my-key-1'], 'the caller’s key on every try');
  t.equal(await cp.jobCount(), 1);
});

t.test('behavior: cancel is not retried on 503; a GET is, up to `retries` times', async (t) => {
  const cp = await controlPlane(t);
  const job = (await createClient({ baseUrl: cp.baseUrl, apiKey: cp.key }).jobs.create(SPEC)).job;
  const front = await frontOf(t, cp.baseUrl, [503, 503, 503, 503]);
  const gf = createClient({ baseUrl: front.baseUrl, apiKey: cp.key, retries: 1 });
  const canceled = await failure(gf.jobs.cancel(job.id));
  t.equal(canceled.code, 'unavailable');
  t.equal(canceled.status, 503);
  t.equal(front.seen.length, 1, 'one try for cancel');
  const got = await failure(gf.jobs.get(job.id));
  t.equal(got.code, 'unavailable');
  t.equal(front.seen.length, 3, 'a GET tried 1 + retries times');
  t.equal((await createClient({ baseUrl: cp.baseUrl, apiKey: cp.key }).jobs.get(job.id)).status, 'CREATED', 'the job was not canceled');
});

t.test('error: network_error against a closed port, after the retries', async (t) => {
  const port = await freePort();
  const events: RequestEvent[] = [];
  const error = await failure(createClient({ baseUrl: `http://127.0.0.1:${port}`, onRequest: (e) => events.push(e) }).pricing());
  t.equal(error.code, 'network_error');
  t.equal(error.status, null);
  t.equal(error.requestId, null);
  t.equal(events.length, 3, 'tried 1 + 2 times');
  t.ok(events.every((e) => e.status === null));
});

t.test('error: timeout when an answer does not arrive in time', async (t) => {
  const server = createServer(() => {
    // never answers
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const gf = createClient({ baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}`, retries: 0, timeoutMs: 200 });
  const error = await failure(gf.pricing());
  t.equal(error.code, 'timeout');
});

t.test('args: Retry-After as seconds or an HTTP date; backoff is jittered and grows', async (t) => {
  const now = Date.parse('2026-11-25T12:00:00Z');
  t.equal(retryAfterMs('1', now), 1000);
  t.equal(retryAfterMs('Wed, 25 Nov 2026 12:00:03 GMT', now), 3000);
  t.equal(retryAfterMs('Wed, 25 Nov 2026 11:00:00 GMT', now), 0, 'a date in the past waits nothing');
  t.equal(retryAfterMs('soon', now), null);
  t.equal(retryAfterMs(null, now), null);
  t.same([0, 1, 2].map((n) => backoffMs(n, () => 0)), [250, 500, 1000], 'the lower bound doubles');
  t.same([0, 1, 2].map((n) => backoffMs(n, () => 1)), [500, 1000, 2000], 'the upper bound doubles');
  t.equal(backoffMs(20, () => 1), 8000, 'capped');
});
