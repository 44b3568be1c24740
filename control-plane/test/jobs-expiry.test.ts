import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gpuFarmEscrowAbi, jobCreatedSchema, jobSchema, logListSchema, type JobCreated } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import type { Hex } from 'viem';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { readEscrowJob } from '../src/chain/escrow.js';
import { loadConfig } from '../src/config.js';
import type { Database } from '../src/db/database.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { scanEscrowEvents, sweepRefunds } from '../src/jobs/escrow-worker.js';
import { expireUnfunded } from '../src/jobs/expiry.js';
import { appendServiceLine } from '../src/logs/store.js';
import { startControlPlane } from '../src/server.js';
import { bearer, createTestKey } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { buildEscrowTestApp, sendFundingCalls, startTestChain } from './helpers/chain.js';
import { openPostgres } from '../src/db/postgres.js';
import { createPostgresTestDatabase } from './helpers/database.js';

const CUSTOMER = ANVIL_ACCOUNTS[1];
const chainP = startTestChain(t);

async function smallFleet(db: Database): Promise<void> {
  const farm = await createFarm(db, { slug: 'expiry-farm' });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 400_000 });
}

async function setup(t: Test, db?: Database) {
  const c = await chainP;
  const app = await buildEscrowTestApp(t, c, db ? { db } : {});
  await smallFleet(app.db);
  await app.offerIndex.refresh();
  const { key } = await createTestKey(app.db, { walletAddress: CUSTOMER.address.toLowerCase() });
  const create = async (): Promise<JobCreated> => {
    const res = await app.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 1 }, maxRuntimeSeconds: 600, paymentToken: 'eth' } });
    t.equal(res.statusCode, 201);
    return jobCreatedSchema.parse(res.json());
  };
  const get = async (id: string) => jobSchema.parse((await app.app.inject({ url: `/v1/jobs/${id}`, headers: bearer(key) })).json());
  const confirm = (id: string, txHash: string) => app.app.inject({ method: 'POST', url: `/v1/jobs/${id}/fund-confirm`, headers: bearer(key), payload: { txHash } });
  return { c, ...app, key, create, get, confirm };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

t.test('behavior: a job still CREATED past the unfunded TTL expires with a system line; funded and canceled jobs are left alone', async (t) => {
  const { c, app, db, key, create, get, confirm } = await setup(t);
  const unfunded = await create();
  const funded = await create();
  const canceled = await create();
  const [tx] = await sendFundingCalls(c, c.wallet(1), funded.funding!.calls);
  t.equal((await confirm(funded.job.id, tx!)).statusCode, 200);
  t.equal((await app.inject({ method: 'POST', url: `/v1/jobs/${canceled.job.id}/cancel`, headers: bearer(key), payload: {} })).json().status, 'CANCELED');

  t.equal(await expireUnfunded({ db, effects: { serviceLine: appendServiceLine } }, { ttlSeconds: 3600 }), 0, 'younger than the TTL: nothing expires');
  t.equal((await get(unfunded.job.id)).status, 'CREATED');

  await sleep(1_100);
  t.equal(await expireUnfunded({ db, effects: { serviceLine: appendServiceLine } }, { ttlSeconds: 1 }), 1, 'one job expired');
  t.equal((await get(unfunded.job.id)).status, 'EXPIRED');
  t.equal((await get(funded.job.id)).status, 'QUEUED');
  t.equal((await get(canceled.job.id)).status, 'CANCELED');
  t.equal(await expireUnfunded({ db, effects: { serviceLine: appendServiceLine } }, { ttlSeconds: 1 }), 0, 'an expired job is not expired again');

  const logs = logListSchema.parse((await app.inject({ url: `/v1/jobs/${unfunded.job.id}/logs`, headers: bearer(key) })).json());
  t.same(logs.data.map((l) => [l.stream, l.line]), [['system', 'expired: not funded within 1 second of its creation; create the job again to run it (a funding sent now is refunded)']]);
  const listed = await app.inject({ url: '/v1/jobs?status=EXPIRED', headers: bearer(key) });
  t.same(listed.json().data.map((j: { id: string }) => j.id), [unfunded.job.id], 'listed under EXPIRED');
  assertError(t, await app.inject({ url: `/v1/jobs/${unfunded.job.id}/funding`, headers: bearer(key) }), 'conflict', 409);
  assertError(t, await app.inject({ method: 'POST', url: `/v1/jobs/${unfunded.job.id}/cancel`, headers: bearer(key), payload: {} }), 'conflict', 409);
});

t.test('behavior: two replicas (two pools) expiring at once expire each job once, with one system line', async (t) => {
  const { db, url } = await createPostgresTestDatabase(t);
  const { create } = await setup(t, db);
  const other = openPostgres(url!);
  t.teardown(() => other.close());
  const jobs = await Promise.all(Array.from({ length: 12 }, () => create()));
  await sleep(1_100);
  const expire = (on: Database) => expireUnfunded({ db: on, effects: { serviceLine: appendServiceLine } }, { ttlSeconds: 1 });
  const counts = await Promise.all([expire(db), expire(other), expire(db), expire(other)]);
  t.equal(counts.reduce((sum, n) => sum + n, 0), jobs.length, 'the expirations add up to the jobs, none counted twice');
  const lines = await db.query<{ job_id: string; n: number }>(
    "SELECT job_id, count(*)::int AS n FROM log_lines WHERE job_id = ANY($1) AND line LIKE 'expired:%' GROUP BY job_id",
    [jobs.map((j) => j.job.id)],
  );
  t.equal(lines.length, jobs.length, 'every job has its line');
  t.ok(lines.every((l) => l.n === 1), 'one line each');
});

t.test('behavior: a funding sent after the job expired is recorded and refunded, never run and never lost', async (t) => {
  const { c, db, escrow, create, get, confirm } = await setup(t);
  const job = await create();
  await sleep(1_100);
  t.equal(await expireUnfunded({ db, effects: { serviceLine: appendServiceLine } }, { ttlSeconds: 1 }), 1);

  const [tx] = await sendFundingCalls(c, c.wallet(1), job.funding!.calls);
  const res = await confirm(job.job.id, tx!);
  assertError(t, res, 'conflict', 409);
  t.match(res.json().error.message, /EXPIRED; its funding was recorded and the escrow refund is being authorized: claim it from your wallet with claimRefund/);
  await sweepRefunds({ db, escrow, startBlock: 0 });
  const after = await get(job.job.id);
  t.equal(after.status, 'EXPIRED', 'it never runs');
  t.equal(after.receipt?.status, 'refund_authorized');
  t.equal(after.receipt?.transactions.fund, tx!.toLowerCase());
  t.equal((await readEscrowJob(escrow.chain, job.job.payment.escrowJobKey as Hex)).status, 'refund_authorized');

  const claim = await c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'claimRefund', args: [job.job.payment.escrowJobKey as Hex] });
  await c.publicClient.waitForTransactionReceipt({ hash: claim });
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  t.equal((await get(job.job.id)).receipt?.status, 'refunded', 'the customer has the deposit back');
});

t.test('behavior: the running control plane expires unfunded jobs on its own (GF_UNFUNDED_JOB_TTL_SECONDS)', async (t) => {
  const { db, url } = await createPostgresTestDatabase(t);
  await smallFleet(db);
  const { key } = await createTestKey(db);
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-expiry-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const config = loadConfig({ PORT: '0', DATABASE_URL: url!, GF_DATA_DIR: dataDir, GF_UNFUNDED_JOB_TTL_SECONDS: '1', GF_EXECUTION_SWEEP_MS: '100' });
  t.equal(loadConfig({}).unfundedJobTtlSeconds, 86_400, 'a day by default');
  const cp = await startControlPlane(config, { logger: false });
  t.teardown(() => cp.close());
  const headers = { ...bearer(key), 'content-type': 'application/json' };
  const created = await fetch(`${cp.url}/v1/jobs`, { method: 'POST', headers, body: JSON.stringify({ image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 1 }, maxRuntimeSeconds: 600 }) });
  t.equal(created.status, 201);
  const id = ((await created.json()) as { job: { id: string } }).job.id;
  let status = '';
  for (let i = 0; i < 100 && status !== 'EXPIRED'; i++) {
    await sleep(100);
    status = ((await (await fetch(`${cp.url}/v1/jobs/${id}`, { headers })).json()) as { status: string }).status;
  }
  t.equal(status, 'EXPIRED');
});
