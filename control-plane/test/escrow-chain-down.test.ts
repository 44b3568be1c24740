import { createServer } from 'node:net';
import { jobCreatedSchema } from '@gpufarm/shared';
import t from 'tap';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { connectChain } from '../src/chain/client.js';
import { releaseJob } from '../src/chain/escrow.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { bearer, createTestKey } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { buildEscrowTestApp, CHAIN_ID, escrowDepsFor, OPERATOR, sendFundingCalls, startTestChain } from './helpers/chain.js';

t.test('error: with the chain down, creation answers funding null with a reason, funding and fund-confirm 503 unavailable', async (t) => {
  const c = await startTestChain(t);
  const { app, db, escrow } = await buildEscrowTestApp(t, c);
  const farm = await createFarm(db);
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const { key } = await createTestKey(db, { walletAddress: ANVIL_ACCOUNTS[1].address.toLowerCase() });
  const create = async (paymentToken: 'eth' | 'stable') =>
    jobCreatedSchema.parse((await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxPricePerGpuHour: '1', paymentToken } })).json());

  const before = await create('eth');
  const [tx] = await sendFundingCalls(c, c.wallet(1), before.funding!.calls);

  await c.anvil.stop();
  const state = await escrow.health.refresh();
  t.same(state.ok, false, 'the probe sees the chain down');

  for (const token of ['eth', 'stable'] as const) {
    const created = await create(token);
    t.equal(created.funding, null, `${token}: no funding calls`);
    t.equal(created.fundingUnavailable?.code, 'chain_unavailable');
    t.match(created.fundingUnavailable?.message, /chain/);
    t.equal(created.job.status, 'CREATED', 'the job exists with its terms');
  }
  assertError(t, await app.inject({ url: `/v1/jobs/${before.job.id}/funding`, headers: bearer(key) }), 'unavailable', 503);
  const res = await app.inject({ method: 'POST', url: `/v1/jobs/${before.job.id}/fund-confirm`, headers: bearer(key), payload: { txHash: tx } });
  assertError(t, res, 'unavailable', 503);
  t.equal(res.json().error.details[0].field, 'chain');
});

t.test('default: without an escrow configured, creation says escrow_not_deployed and funding endpoints are 503', async (t) => {
  const { buildTestApp } = await import('./helpers/app.js');
  const { app, db } = await buildTestApp(t);
  const farm = await createFarm(db);
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const { key } = await createTestKey(db);
  const created = jobCreatedSchema.parse((await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxPricePerGpuHour: '1' } })).json());
  t.equal(created.fundingUnavailable?.code, 'escrow_not_deployed');
  assertError(t, await app.inject({ url: `/v1/jobs/${created.job.id}/funding`, headers: bearer(key) }), 'unavailable', 503);
  assertError(t, await app.inject({ method: 'POST', url: `/v1/jobs/${created.job.id}/fund-confirm`, headers: bearer(key), payload: { txHash: `0x${'ab'.repeat(32)}` } }), 'unavailable', 503);
});

t.test('error: rate_limited after 30 fund-confirm calls a minute, a bucket of its own', async (t) => {
  const { buildTestApp } = await import('./helpers/app.js');
  const start = Date.UTC(2026, 10, 22, 12, 0, 0);
  const { app, db } = await buildTestApp(t, { now: () => start });
  const { key } = await createTestKey(db);
  const url = `/v1/jobs/job_${'a'.repeat(26)}/fund-confirm`;
  for (let i = 0; i < 30; i++) {
    const res = await app.inject({ method: 'POST', url, headers: bearer(key), payload: { txHash: `0x${'ab'.repeat(32)}` } });
    t.equal(res.statusCode, 404, `call ${i + 1} passes the limit (no such job)`);
  }
  const limited = await app.inject({ method: 'POST', url, headers: bearer(key), payload: { txHash: `0x${'ab'.repeat(32)}` } });
  assertError(t, limited, 'rate_limited', 429);
  t.ok(limited.headers['retry-after']);
  t.equal((await app.inject({ url: '/v1/billing', headers: bearer(key) })).statusCode, 200, 'other endpoints still answer');
});

/** A local port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

t.test('behavior: a revert is not retryable; an RPC that does not answer is, whatever its URL says', async (t) => {
  const c = await startTestChain(t);
  const { chain } = await escrowDepsFor(t, c);
  const neverFunded = `0x${'12'.repeat(32)}` as const;
  const reverted = await releaseJob(chain, neverFunded).catch((e: unknown) => e);
  t.match(reverted, { name: 'ChainError', code: 'chain_reverted', retryable: false }, 'the escrow refuses to release a job it never held');
  t.equal((reverted as Error).message, 'release failed: the escrow refused it (WrongStatus)', 'named by the escrow\'s error');

  // The word "revert" in the URL ends up in viem's message; the classification does not read it.
  const dead = connectChain({ rpcUrl: `http://127.0.0.1:${await closedPort()}/revert-guard`, chainId: CHAIN_ID, escrowAddress: c.deployment.escrow, operatorPrivateKey: OPERATOR.privateKey, timeoutMs: 1_000 });
  const down = await releaseJob(dead, neverFunded).catch((e: unknown) => e);
  t.match(down, { name: 'ChainError', code: 'chain_unavailable', retryable: true }, 'nothing answered: try again later');
  t.match((down as Error).message, /^release failed: HTTP request failed/);
});
