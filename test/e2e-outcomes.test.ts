import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { escrowJob } from './helpers/escrow.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * End to end, separate processes: how jobs end besides a verified canary. One agent with two
 * simulated GPUs, so the one-minute timeout job runs beside the others.
 */

// Separate processes, real containers and a chain: minutes, not the default two.
t.setTimeout(300_000);

const FARM = 'e2e-outcomes';
const PAYOUT = privateKeyToAddress(generatePrivateKey());

const market = await Marketplace.start(t);
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, priceUsd: '0.60', gpus: '2x rtx-4090-24gb' });
agent.start();
await market.waitForCapacity(FARM, 2);
const customer = await Customer.create(market, 1);

// The shortest runtime limit the spec allows is 60 s: start that job first, check it last.
const timeoutJob = await customer.createFundedJob(busyboxSpec(market.images, 'echo started; echo partial > /output/partial.txt; exec sleep 600', { maxRuntimeSeconds: 60, title: 'sleeps past its limit' }));

t.test('error: conflict: cancel while RUNNING is 409 and the job runs on', async (t) => {
  const id = timeoutJob.created.job.id;
  await customer.waitForStatus(id, ['RUNNING'], 45_000);
  const cancel = await customer.request<{ error: { code: string } }>('POST', `/v1/jobs/${id}/cancel`, { reason: 'changed my mind' });
  t.equal(cancel.status, 409);
  t.equal(cancel.body.error?.code, 'conflict');
  t.equal((await customer.getJob(id)).status, 'RUNNING');
});

t.test('behavior: a non-canary job pinned by digest whose hashes match and whose record verifies is EXECUTION_VERIFIED', async (t) => {
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo hello; echo oops >&2; echo data > /output/data.txt'));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED');
  t.same(linesOf(lines, 'stdout').map((l) => l.line), ['hello']);
  t.same(linesOf(lines, 'stderr').map((l) => l.line), ['oops']);
  const job = await customer.getJob(created.job.id);
  t.equal(job.verificationLevel, 'EXECUTION_VERIFIED');
  t.equal(job.result?.hashesMatch, true);
  t.equal(job.assignment?.exitCode, 0);
  const download = await customer.download(job.result!.outputArtifactId!);
  t.equal(download.sha256, download.sha256Header);
  t.equal(download.sha256, job.result!.serverHash);
  t.equal(job.receipt?.status, 'completed', 'charged: the completion is on chain');
});

t.test('behavior: a job whose image is missing ends FAILED after its retries, with a system line saying why, no charge and the refund authorized', async (t) => {
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'true', { image: `${market.images.busybox.repository.replace(/busybox$/, 'no-such-image')}@sha256:${'0'.repeat(64)}`, title: 'missing image' }));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id, { timeoutMs: 150_000 });
  t.equal(jobStatus, 'FAILED');
  const system = linesOf(lines, 'system').map((l) => l.line);
  t.ok(system.some((l) => /pull|image|not found|manifest/i.test(l)), `a system line says why: ${JSON.stringify(system)}`);
  t.equal(system.filter((l) => l.startsWith('matched:')).length, 3, 'matched three times: the first run and two more attempts');
  t.ok(system.some((l) => /^failed: .*pull/.test(l)), 'the last system line of the job says it failed and why');
  const job = await customer.getJob(created.job.id);
  t.equal(job.status, 'FAILED');
  t.ok(job.cost === null || job.cost.totalMicroUsd === 0, `no charge: ${JSON.stringify(job.cost)}`);
  t.equal(job.receipt?.status, 'refund_authorized', 'the refund is authorized');
  t.equal((await escrowJob(market, job.payment.escrowJobKey as `0x${string}`)).statusName, 'RefundAuthorized', 'on chain too');
});

t.test('behavior: a job past maxRuntimeSeconds is stopped, TIMED_OUT and billed for its runtime', async (t) => {
  const id = timeoutJob.created.job.id;
  const { lines, jobStatus } = await customer.tailLogs(id, { timeoutMs: 150_000 });
  t.equal(jobStatus, 'TIMED_OUT');
  t.ok(linesOf(lines, 'stdout').some((l) => l.line === 'started'));
  const job = await customer.getJob(id);
  t.equal(job.status, 'TIMED_OUT');
  t.ok(job.cost, 'a cost');
  t.ok(job.cost!.billableGpuSeconds >= 60, `billed for its runtime (${job.cost!.billableGpuSeconds} s)`);
  t.ok(job.cost!.totalMicroUsd > 0);
  t.ok(BigInt(job.cost!.finalPayment) > 0n, 'a payment is due');
  t.equal(job.receipt?.status, 'completed', 'the completion is on chain: the provider will be paid');
  t.ok(job.result?.outputArtifactId, 'what it wrote before the stop is stored');
});
