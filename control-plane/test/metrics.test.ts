import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { startMetricsListener } from '@gpufarm/shared/node';
import t from 'tap';
import { createFsBlobStore } from '../src/artifacts/fs-blob-store.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { createJobOwner, createQueuedJobs } from '../src/testing/job-factories.js';
import { startMatcher } from '../src/matching/loop.js';
import { meteredBlobStore } from '../src/metrics/blob-meter.js';
import { createControlPlaneMetrics, type ControlPlaneMetrics } from '../src/metrics/registry.js';
import { assertError } from './helpers/assert.js';
import { bearer, buildTestApp, buildUnreachableDatabaseApp } from './helpers/app.js';
import { buildEscrowTestApp, startTestChain } from './helpers/chain.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { scanEscrowEvents } from '../src/jobs/escrow-worker.js';

const METRICS_TOKEN = 'metrics-token-0123456789abcdef0123456789';

/** The value of one series, or undefined when the registry has no such series. */
async function sample(metrics: ControlPlaneMetrics, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  // A histogram's `_count`, `_sum` and `_bucket` series are values of the histogram.
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name || m.name === name.replace(/_(count|sum|bucket)$/, ''));
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => String((v.labels as Record<string, unknown>)[k]) === l) && ((v as { metricName?: string }).metricName ?? name) === name);
  return value?.value;
}

t.test('default: /healthz and /readyz answer 200 with every check passing, without a key and outside the rate limit', async (t) => {
  const { app } = await buildTestApp(t);
  const health = await app.inject({ url: '/healthz' });
  t.equal(health.statusCode, 200);
  t.same(health.json(), { status: 'ok' });
  const ready = await app.inject({ url: '/readyz', headers: bearer('not-a-key') });
  t.equal(ready.statusCode, 200, 'a stray Authorization header is not read');
  t.same(ready.json(), { status: 'ready', failing: [], checks: { database: { ok: true }, offerIndex: { ok: true } } });
  t.equal(ready.headers['x-ratelimit-limit'], undefined, 'not counted against a rate limit');
});

t.test('error: /readyz answers 503 naming the database and the offer index when the database cannot be reached; /healthz stays 200', async (t) => {
  const { app } = await buildUnreachableDatabaseApp(t);
  const ready = await app.inject({ url: '/readyz' });
  t.equal(ready.statusCode, 503);
  const body = ready.json();
  t.same(body.failing, ['database', 'offerIndex']);
  t.equal(body.status, 'not_ready');
  t.match(body.checks.database, { ok: false, reason: /database/ });
  t.notMatch(ready.body, /ECONNREFUSED|127\.0\.0\.1/, 'no connection details leak');
  t.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
});

t.test('behavior: requests are counted by route pattern, method and code; paths no route matched share one label', async (t) => {
  const metrics = createControlPlaneMetrics();
  const { app } = await buildTestApp(t, { metrics });
  for (const id of ['job_a', 'job_b']) await app.inject({ url: `/v1/jobs/${id}` });
  await app.inject({ url: '/v1' });
  await app.inject({ url: '/nothing/here/1' });
  await app.inject({ url: '/nothing/here/2' });
  t.equal(await sample(metrics, 'gf_http_requests_total', { route: '/v1/jobs/:id', method: 'GET', code: '401' }), 2, 'one series for both job ids');
  t.equal(await sample(metrics, 'gf_http_requests_total', { route: '/v1', method: 'GET', code: '200' }), 1);
  t.equal(await sample(metrics, 'gf_http_requests_total', { route: 'unmatched', method: 'GET', code: '404' }), 2);
  const text = await metrics.registry.metrics();
  t.notMatch(text, /job_a|nothing\/here/, 'no raw URL becomes a label');
  t.match(text, /gf_http_request_duration_seconds_bucket\{[^}]*method="GET",route="\/v1",code="200"\}/, 'latency histogram by the same labels');
  t.match(text, /gf_process_cpu_seconds_total/, 'default process metrics, in our namespace');
});

t.test('behavior: jobs by state, machines and fleet GPUs by class and state are read from the database at scrape time', async (t) => {
  const metrics = createControlPlaneMetrics();
  const { db } = await createPostgresTestDatabase(t);
  metrics.attach({ db, agentLinks: () => 3 });
  const farm = await createFarm(db);
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 4, busyGpus: 1, pricePerGpuHourMicroUsd: 400_000 });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 2, status: 'offline', pricePerGpuHourMicroUsd: 400_000 });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'l4-24gb', gpuCount: 1, status: 'draining', pricePerGpuHourMicroUsd: 300_000 });
  const owner = await createJobOwner(db);
  await createQueuedJobs(db, owner, [{}, {}, { status: 'CREATED' }]);
  t.equal(await sample(metrics, 'gf_fleet_gpus', { class: 'rtx-4090-24gb', state: 'idle' }), 3);
  t.equal(await sample(metrics, 'gf_fleet_gpus', { class: 'rtx-4090-24gb', state: 'busy' }), 1);
  t.equal(await sample(metrics, 'gf_fleet_gpus', { class: 'rtx-4090-24gb', state: 'offline' }), 2);
  t.equal(await sample(metrics, 'gf_fleet_gpus', { class: 'l4-24gb', state: 'draining' }), 1);
  t.equal(await sample(metrics, 'gf_machines', { status: 'online' }), 1);
  t.equal(await sample(metrics, 'gf_jobs', { state: 'QUEUED' }), 2);
  t.equal(await sample(metrics, 'gf_jobs', { state: 'CREATED' }), 1);
  t.equal(await sample(metrics, 'gf_jobs', { state: 'RUNNING' }), 0, 'every state has a series');
  t.equal(await sample(metrics, 'gf_gateway_agent_links'), 3);
  t.equal(await sample(metrics, 'gf_chain_rpc_up'), undefined, 'no chain configured: no chain series');
});

t.test('behavior: with a chain, its probe, the escrow scan lag and /readyz follow the RPC; a chain down fails readiness', async (t) => {
  const c = await startTestChain(t);
  const { app, db, escrow } = await buildEscrowTestApp(t, c);
  const metrics = createControlPlaneMetrics();
  metrics.attach({ db, escrow });
  t.equal(await sample(metrics, 'gf_chain_rpc_up'), 1);
  t.ok(((await sample(metrics, 'gf_chain_rpc_probe_duration_seconds')) ?? 0) > 0, 'the probe is timed');
  const head = Number(await c.publicClient.getBlockNumber());
  t.equal(await sample(metrics, 'gf_escrow_worker_lag_blocks'), head + 1, 'before the first scan, every block from the start block (0) is to be read');
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  await escrow.health.refresh();
  t.equal(await sample(metrics, 'gf_escrow_worker_lag_blocks'), 0, 'the scan is at the head');
  await c.testClient.mine({ blocks: 3 });
  await escrow.health.refresh();
  t.equal(await sample(metrics, 'gf_escrow_worker_lag_blocks'), 3, 'three blocks mined since the scan');
  const ready = await app.inject({ url: '/readyz' });
  t.equal(ready.statusCode, 200);
  t.same(ready.json().checks.chain, { ok: true });

  await c.anvil.stop();
  await escrow.health.refresh();
  const down = await app.inject({ url: '/readyz' });
  t.equal(down.statusCode, 503);
  t.same(down.json().failing, ['chain'], 'only the chain fails');
  t.match(down.json().checks.chain.reason, /not answering/);
  t.equal(await sample(metrics, 'gf_chain_rpc_up'), 0);
  t.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
});

t.test('behavior: a matcher pass records its duration and each matched job its queue wait', async (t) => {
  const metrics = createControlPlaneMetrics();
  const { db } = await createPostgresTestDatabase(t);
  const farm = await createFarm(db);
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'l4-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 300_000 });
  // An enrolled machine's GPUs have UUIDs and it has a token (seeded ones have neither).
  await db.query(`UPDATE machine_gpus SET uuid = 'GPU-' || md5(machine_id || ':' || gpu_index) WHERE machine_id = $1`, [machine.id]);
  await db.query(`UPDATE machines SET token_hash = md5(id) WHERE id = $1`, [machine.id]);
  const owner = await createJobOwner(db);
  await createQueuedJobs(db, owner, [{}]);
  await db.query(`UPDATE jobs SET status_changed_at = now() - interval '90 seconds'`);
  const passes: number[] = [];
  const loop = startMatcher({ db }, { intervalMs: 60_000, metrics: metrics.matcher, onPass: (r) => passes.push(r.matched.length) });
  t.teardown(() => loop.close());
  for (let i = 0; i < 200 && passes.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
  t.same(passes, [1], 'one pass matched the job');
  t.equal(await sample(metrics, 'gf_matcher_pass_duration_seconds_count'), 1);
  t.equal(await sample(metrics, 'gf_job_queue_wait_seconds_count'), 1);
  const waited = (await sample(metrics, 'gf_job_queue_wait_seconds_sum')) ?? 0;
  t.ok(waited >= 90 && waited < 3600, `the wait counts from QUEUED (${waited} s)`);
});

t.test('behavior: artifact bytes are counted as the store keeps them', async (t) => {
  const metrics = createControlPlaneMetrics();
  const dir = mkdtempSync(join(tmpdir(), 'gf-metered-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const blobs = meteredBlobStore(createFsBlobStore(dir), metrics.artifactBytes);
  const stored = await blobs.put(Readable.from([Buffer.alloc(1000, 1), Buffer.alloc(234, 2)]), { maxBytes: 10_000 });
  t.equal(stored.sizeBytes, 1234);
  t.equal(await sample(metrics, 'gf_artifact_bytes_total'), 1234);
  t.equal((await blobs.stat(stored.sha256))?.sizeBytes, 1234, 'reads pass through');
});

t.test('args: GF_METRICS_TOKEN serves /metrics on the API port to that bearer only', async (t) => {
  const metrics = createControlPlaneMetrics();
  const { app } = await buildTestApp(t, { metrics, env: { GF_METRICS_TOKEN: METRICS_TOKEN } });
  assertError(t, await app.inject({ url: '/metrics' }), 'invalid_api_key', 401);
  assertError(t, await app.inject({ url: '/metrics', headers: bearer(`${METRICS_TOKEN}x`) }), 'invalid_api_key', 401);
  const res = await app.inject({ url: '/metrics', headers: bearer(METRICS_TOKEN) });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  t.match(res.body, /# TYPE gf_http_requests_total counter/);
});

t.test('default: without GF_METRICS_TOKEN the API port has no /metrics', async (t) => {
  const { app } = await buildTestApp(t, { metrics: createControlPlaneMetrics() });
  t.equal((await app.inject({ url: '/metrics' })).statusCode, 404);
});

t.test('args: GF_METRICS_LISTEN serves /metrics alone on its own listener', async (t) => {
  const metrics = createControlPlaneMetrics();
  const listener = await startMetricsListener(metrics.registry, { host: '127.0.0.1', port: 0 });
  t.teardown(() => listener.close());
  const res = await fetch(`${listener.url}/metrics`);
  t.equal(res.status, 200);
  t.match(await res.text(), /# TYPE gf_log_bytes_total counter/);
  t.equal((await fetch(`${listener.url}/v1`)).status, 404, 'nothing else is served there');
});

t.test('error: GF_METRICS_LISTEN must be host:port or off; GF_METRICS_TOKEN is never shown', async (t) => {
  t.same(loadConfig({}).metrics, { listen: null, token: null }, 'off by default');
  t.same(loadConfig({ GF_METRICS_LISTEN: '0.0.0.0:9469' }).metrics.listen, { host: '0.0.0.0', port: 9469 });
  t.same(loadConfig({ GF_METRICS_LISTEN: '[::1]:9469' }).metrics.listen, { host: '::1', port: 9469 });
  t.throws(() => loadConfig({ GF_METRICS_LISTEN: '9469' }), ConfigError);
  try {
    loadConfig({ GF_METRICS_LISTEN: 'localhost', GF_METRICS_TOKEN: 'short-secret' });
    t.fail('accepted');
  } catch (err) {
    t.match((err as ConfigError).problems.join('\n'), /GF_METRICS_LISTEN: must be host:port/);
    t.notMatch((err as ConfigError).problems.join('\n'), /short-secret/);
  }
});
