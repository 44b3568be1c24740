import { billingListSchema, jobCreatedSchema, jobSchema } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { encodeFunctionData, zeroAddress, type Hex } from 'viem';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { gpuFarmEscrowAbi } from '@gpufarm/shared';
import { readEscrowJob } from '../src/chain/escrow.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { checkReorgs, scanEscrowEvents, sweepReleases } from '../src/jobs/escrow-worker.js';
import { microUsdToTokenUnits, recordCompletion } from '../src/jobs/settlement.js';
import { bearer, createTestKey } from './helpers/app.js';
import { buildEscrowTestApp, deployTestWallet, ON_RECEIVE, sendFundingCalls, startTestChain, walletExecute } from './helpers/chain.js';
import { testWalletAbi } from './helpers/test-contracts.generated.js';

const chainP = startTestChain(t, { challengeWindowSeconds: 120 });
const PROVIDER = '0x000000000000000000000000000000000000beef' as const;

async function fundedJob(t: Test, paymentToken: 'eth' | 'stable') {
  const c = await chainP;
  const app = await buildEscrowTestApp(t, c);
  const farm = await createFarm(app.db);
  await createMachine(app.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await app.offerIndex.refresh();
  const { key } = await createTestKey(app.db, { walletAddress: ANVIL_ACCOUNTS[3].address.toLowerCase() });
  const created = jobCreatedSchema.parse((await app.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxRuntimeSeconds: 3600, paymentToken } })).json());
  const snapshot = await c.testClient.snapshot();
  const tx = (await sendFundingCalls(c, c.wallet(3), created.funding!.calls)).at(-1)!;
  const confirmed = await app.app.inject({ method: 'POST', url: `/v1/jobs/${created.job.id}/fund-confirm`, headers: bearer(key), payload: { txHash: tx } });
  t.equal(confirmed.statusCode, 200, 'funded');
  const get = async () => jobSchema.parse((await app.app.inject({ url: `/v1/jobs/${created.job.id}`, headers: bearer(key) })).json());
  return { c, ...app, key, job: created.job, tx, snapshot, get };
}

t.test('behavior: completion records the final payment on the escrow; the sweeper releases it after the window', async (t) => {
  const { c, db, escrow, app, key, job, tx, get } = await fundedJob(t, 'stable');
  // 600 s on one GPU at $0.40: compute 66,667 micro-USD, fee 6,667, total 73,334 (6 decimals: the same base units).
  const { payout, fee, cost } = await recordCompletion({ db, escrow }, { jobId: job.id, runtimeSeconds: 600, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'cd'.repeat(32)}`, provider: PROVIDER });
  t.same(cost, { billableGpuSeconds: 600, computeMicroUsd: 66_667, feeMicroUsd: 6_667, totalMicroUsd: 73_334 });
  t.equal(payout, 73_334n);
  t.equal(fee, 6_667n);
  const completed = await get();
  t.equal(completed.receipt?.status, 'completed');
  t.equal(completed.receipt?.amount, '73334');
  t.equal(completed.receipt?.computeSeconds, 600);
  t.equal(completed.receipt?.resultHash, `0x${'cd'.repeat(32)}`);
  t.ok(completed.receipt?.challengeEndsAt);
  t.equal(completed.receipt?.transactions.fund, tx.toLowerCase());
  t.ok(completed.receipt?.transactions.completion);
  t.equal(completed.receipt?.transactions.release, null);

  t.equal(await sweepReleases({ db, escrow, startBlock: 0 }), 0, 'nothing is due inside the window');
  await c.testClient.increaseTime({ seconds: 121 });
  await c.testClient.mine({ blocks: 1 });
  const later = () => new Date(Date.now() + 3_600_000);
  t.equal(await sweepReleases({ db, escrow, startBlock: 0, now: later }), 1, 'released after the window');
  const released = await get();
  t.equal(released.receipt?.status, 'released');
  t.ok(released.receipt?.transactions.release);
  t.equal((await readEscrowJob(escrow.chain, job.payment.escrowJobKey as Hex)).status, 'released');
  t.equal(await sweepReleases({ db, escrow, startBlock: 0, now: later }), 0, 'released once');
  const billing = billingListSchema.parse((await app.inject({ url: '/v1/billing', headers: bearer(key) })).json());
  t.same(billing.data.map((e) => e.type), ['release', 'charge', 'funded']);
  t.equal(billing.data[1]!.amountMicroUsd, 73_334);
});

t.test('behavior: the payment is capped at maxPayment; ETH converts at the frozen rate', async (t) => {
  const { db, escrow, job } = await fundedJob(t, 'eth');
  const row = { payment_kind: 'eth' as const, payment_decimals: 18, wei_per_usd: '333333333333333' };
  t.equal(microUsdToTokenUnits(row, 1_000_000), 333_333_333_333_333n);
  t.equal(microUsdToTokenUnits(row, 1), 333_333_334n, 'rounded up');
  // Far beyond the runtime cap: the payout stops at maxPayment.
  const { payout } = await recordCompletion({ db, escrow }, { jobId: job.id, runtimeSeconds: 100 * 3600, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'00'.repeat(32)}`, provider: PROVIDER });
  t.equal(payout, BigInt(job.payment.maxPayment));
});

t.test('behavior: the customer approving early is recorded from the escrow events', async (t) => {
  const { c, db, escrow, job, get } = await fundedJob(t, 'stable');
  await recordCompletion({ db, escrow }, { jobId: job.id, runtimeSeconds: 60, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'01'.repeat(32)}`, provider: PROVIDER });
  const hash = await c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'approve', args: [job.payment.escrowJobKey as Hex] });
  await c.publicClient.waitForTransactionReceipt({ hash });
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  const after = await get();
  t.equal(after.receipt?.status, 'released');
  t.equal(after.receipt?.transactions.release, hash.toLowerCase());
});

t.test('behavior: a payout deferred to a provider that refuses ETH, and its later withdrawal, do not stop the event scan', async (t) => {
  const { c, db, escrow, job, get } = await fundedJob(t, 'eth');
  const provider = await deployTestWallet(c, 1, ON_RECEIVE.refuse);
  await recordCompletion({ db, escrow }, { jobId: job.id, runtimeSeconds: 60, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'02'.repeat(32)}`, provider });
  const release = await c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'approve', args: [job.payment.escrowJobKey as Hex] });
  await c.publicClient.waitForTransactionReceipt({ hash: release });
  const owed = await c.publicClient.readContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'withdrawable', args: [provider, zeroAddress] });
  t.ok(owed > 0n, 'the payout waits in the escrow');
  await c.publicClient.waitForTransactionReceipt({ hash: await c.wallet(1).writeContract({ address: provider, abi: testWalletAbi, functionName: 'setOnReceive', args: [ON_RECEIVE.accept] }) });
  await walletExecute(c, 1, provider, { to: c.deployment.escrow, data: encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'withdraw', args: [zeroAddress] }) });
  t.equal(await c.publicClient.getBalance({ address: provider }), owed, 'withdrawn');
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  const after = await get();
  t.equal(after.receipt?.status, 'released', 'the release is recorded');
  t.equal(after.receipt?.transactions.release, release.toLowerCase());
});

t.test('behavior: a reorg that drops the funding block holds the job', async (t) => {
  const { c, db, escrow, job, snapshot, get } = await fundedJob(t, 'eth');
  t.same(await checkReorgs({ db, escrow, startBlock: 0 }), [], 'the funding block is intact');
  await c.testClient.revert({ id: snapshot });
  await c.testClient.mine({ blocks: 3 });
  t.same(await checkReorgs({ db, escrow, startBlock: 0 }), [job.id], 'held once its block changed');
  const [row] = await db.query<{ funding_hold: string | null; status: string }>('SELECT funding_hold, status FROM jobs WHERE id = $1', [job.id]);
  t.match(row?.funding_hold, /reorganisation/);
  const [credit] = await db.query<{ status: string }>('SELECT status FROM escrow_credits WHERE job_id = $1', [job.id]);
  t.equal(credit?.status, 'reorged');
  t.same(await checkReorgs({ db, escrow, startBlock: 0 }), [], 'held once');
  t.equal((await get()).status, 'QUEUED', 'held, not moved: the matcher skips jobs with a funding hold');
});

t.test('behavior: a release the customer sent while ours was due is recorded by the event scan with its deferrals, never without them', async (t) => {
  const { c, db, escrow, job, get } = await fundedJob(t, 'eth');
  const provider = await deployTestWallet(c, 1, ON_RECEIVE.refuse);
  await recordCompletion({ db, escrow }, { jobId: job.id, runtimeSeconds: 60, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'03'.repeat(32)}`, provider });
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  await c.testClient.increaseTime({ seconds: 121 });
  await c.testClient.mine({ blocks: 1 });
  // The customer approves as the window ends; our release, due now, finds the job paid out.
  const approve = await c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'approve', args: [job.payment.escrowJobKey as Hex] });
  await c.publicClient.waitForTransactionReceipt({ hash: approve });
  const deferrals = async () => (await db.query<{ n: string }>('SELECT count(*)::text AS n FROM escrow_deferred_payments WHERE job_id = $1', [job.id]))[0]!.n;
  await sweepReleases({ db, escrow, startBlock: 0, now: () => new Date(Date.now() + 3_600_000) });
  t.equal((await get()).receipt?.status, 'completed', 'not recorded as released by the refused release, which knows nothing of the deferral');
  t.equal(await deferrals(), '0');
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  const after = await get();
  t.equal(after.receipt?.status, 'released');
  t.equal(after.receipt?.transactions.release, approve.toLowerCase());
  t.equal(await deferrals(), '1', 'the provider\'s deferred payout, recorded with the release');
});
