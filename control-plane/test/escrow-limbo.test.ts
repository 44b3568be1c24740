import { gpuFarmEscrowAbi, jobCreatedSchema, jobSchema, withdrawalListSchema } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { getAddress, type Address, type Hash, type Hex } from 'viem';
import { resolveJobDispute } from '../src/admin/disputes.js';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { readEscrowJob } from '../src/chain/escrow.js';
import type { Database } from '../src/db/database.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { scanEscrowEvents, sweepDisputeTimeouts, sweepReleases } from '../src/jobs/escrow-worker.js';
import { recordCompletion } from '../src/jobs/settlement.js';
import { insertAssignment } from './helpers/agent-client.js';
import { bearer, createTestKey } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { BLOCK, buildEscrowTestApp, deployBlocklistToken, sendFundingCalls, startTestChain, type TestChain } from './helpers/chain.js';
import { blocklistTokenAbi } from './helpers/test-contracts.generated.js';
import { devWallet, fakeWebDist, PUBLIC_URL, session, signIn } from './helpers/web.js';

/**
 * Money the escrow holds after a job's release, on a real anvil through the control plane's
 * HTTP API: payouts the escrow could not send (PaymentDeferred) are recorded and shown to the
 * customer and the farm as waiting for withdrawal until the wallet's own `withdraw(token)` is
 * seen; a dispute no admin resolves ends at its deadline with the whole deposit back.
 */

const chainP = startTestChain(t, { challengeWindowSeconds: 60 });
const CUSTOMER = ANVIL_ACCOUNTS[3];
const PAYOUT = ANVIL_ACCOUNTS[2];
const DISPUTE_TIMEOUT_SECONDS = 14 * 24 * 3600;

const mined = async (c: TestChain, hash: Promise<Hash>) => c.publicClient.waitForTransactionReceipt({ hash: await hash });

/** The control plane on the test chain, paid in a token with a blocklist (so a payout can be refused), a farm paid to dev account 2, dev account 3 as the customer. */
async function setup(t: Test) {
  const c = await chainP;
  const token = await deployBlocklistToken(c);
  await mined(c, c.wallet(3).writeContract({ address: token, abi: blocklistTokenAbi, functionName: 'mint', args: [CUSTOMER.address, 10n ** 12n] }));
  const test = await buildEscrowTestApp(t, c, { env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t), GF_STABLE_TOKEN_ADDRESS: token, GF_STABLE_TOKEN_SYMBOL: 'bUSD', GF_ADMIN_WALLETS: devWallet(1).address } });
  const { app, db } = test;
  const farm = await createFarm(db, { slug: 'limbo-farm', payoutAddress: PAYOUT.address });
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await test.offerIndex.refresh();
  const { key } = await createTestKey(db, { walletAddress: CUSTOMER.address.toLowerCase() });
  const get = async (id: string) => jobSchema.parse((await app.inject({ url: `/v1/jobs/${id}`, headers: bearer(key) })).json());
  const setBlocked = (who: Address, how: (typeof BLOCK)[keyof typeof BLOCK]) => mined(c, c.wallet(1).writeContract({ address: token, abi: blocklistTokenAbi, functionName: 'setBlocked', args: [who, how] }));
  const tokenBalance = (who: Address) => c.publicClient.readContract({ address: token, abi: blocklistTokenAbi, functionName: 'balanceOf', args: [who] });
  /** A job funded from the customer's wallet, run on the farm's machine and completed on the escrow. */
  const completedJob = async () => {
    const created = jobCreatedSchema.parse(
      (await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxRuntimeSeconds: 3600, paymentToken: 'stable' } })).json(),
    );
    const tx = (await sendFundingCalls(c, c.wallet(3), created.funding!.calls)).at(-1)!;
    const confirmed = await app.inject({ method: 'POST', url: `/v1/jobs/${created.job.id}/fund-confirm`, headers: bearer(key), payload: { txHash: tx } });
    t.equal(confirmed.statusCode, 200, confirmed.body);
    await ranOn(db, created.job.id, machine.id);
    const done = await recordCompletion(test, { jobId: created.job.id, runtimeSeconds: 600, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'cd'.repeat(32)}`, provider: getAddress(PAYOUT.address) });
    return { id: created.job.id, key: created.job.payment.escrowJobKey as Hex, deposit: BigInt(created.job.payment.maxPayment), payout: done.payout, fee: done.fee };
  };
  const scan = () => scanEscrowEvents({ db, escrow: test.escrow, startBlock: 0 });
  return { c, token: token.toLowerCase() as Address, ...test, key, get, setBlocked, tokenBalance, completedJob, scan };
}

/** The job ran on the machine: the finished assignment that produced its result. */
async function ranOn(db: Database, jobId: string, machineId: string): Promise<void> {
  const assignmentId = await insertAssignment(db, { jobId, machineId, state: 'finished' });
  await db.query('UPDATE jobs SET assignment_id = $2 WHERE id = $1', [jobId, assignmentId]);
}

async function afterWindow(c: TestChain, seconds = 61) {
  await c.testClient.increaseTime({ seconds });
  await c.testClient.mine({ blocks: 1 });
}

/** Far enough ahead of the wall clock for any deadline the tests moved the chain past. */
const later = () => new Date(Date.now() + 60 * 86_400_000);

t.test('behavior: payouts the escrow defers are recorded, shown to the customer and the farm as waiting for withdrawal, and settled when each wallet withdraws', async (t) => {
  const { c, app, db, escrow, token, get, setBlocked, tokenBalance, completedJob, scan } = await setup(t);
  const customer = await signIn(app, devWallet(3));
  const operator = await signIn(app, devWallet(2));

  // Job A: released by the escrow worker while the token refuses both the farm and the customer.
  const a = await completedJob();
  await setBlocked(PAYOUT.address, BLOCK.returnFalse);
  await setBlocked(CUSTOMER.address, BLOCK.revert);
  await afterWindow(c);
  t.equal(await sweepReleases({ db, escrow, startBlock: 0, now: later }), 1, 'the worker releases job A');
  const farmShareA = a.payout - a.fee;
  const customerShareA = a.deposit - a.payout;
  t.equal(await tokenBalance(PAYOUT.address), 0n, 'the farm got nothing yet');

  const releasedA = await get(a.id);
  t.equal(releasedA.receipt?.status, 'released', 'the escrow released the job');
  t.same(releasedA.receipt?.withdrawal, { status: 'waiting_withdrawal', wallet: CUSTOMER.address.toLowerCase(), amount: customerShareA.toString(), withdrawTxHash: null, withdrawnAt: null }, "the job's receipt: the customer's share waits for withdrawal");

  // Job B: the customer approves it early, still refusing the farm: only the event scan sees it.
  await setBlocked(CUSTOMER.address, BLOCK.none);
  const b = await completedJob();
  await mined(c, c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'approve', args: [b.key] }));
  await scan();
  await scan();
  const farmShareB = b.payout - b.fee;
  t.equal((await get(b.id)).receipt?.withdrawal, null, "job B paid the customer's share: nothing waits for them");

  const mine = withdrawalListSchema.parse((await app.inject({ url: '/dashboard/api/withdrawals', headers: session(customer) })).json());
  t.same(mine.data.map((w) => [w.wallet, w.token, w.symbol, w.amount, w.jobs.map((j) => j.jobId)]), [[CUSTOMER.address.toLowerCase(), token, 'bUSD', customerShareA.toString(), [a.id]]], 'the customer sees its refund waiting');
  const farms = withdrawalListSchema.parse((await app.inject({ url: '/operator/api/withdrawals', headers: session(operator) })).json());
  t.same(
    farms.data.map((w) => [w.wallet, w.token, w.amount, w.jobs.map((j) => [j.jobId, j.amount])]),
    [[PAYOUT.address.toLowerCase(), token, (farmShareA + farmShareB).toString(), [[a.id, farmShareA.toString()], [b.id, farmShareB.toString()]]]],
    'the farm sees both payouts waiting, once each (the release and the scan both reported job A)',
  );
  const [deferredCount] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM escrow_deferred_payments');
  t.equal(deferredCount?.n, 3, 'three deferrals recorded: two payouts to the farm, one refund to the customer');
  const earnings = (await app.inject({ url: '/operator/api/earnings', headers: session(operator) })).json();
  t.same(earnings.data.map((r: { jobId: string; state: string; amount: string }) => [r.jobId, r.state, r.amount]), [[b.id, 'waiting_withdrawal', farmShareB.toString()], [a.id, 'waiting_withdrawal', farmShareA.toString()]], 'earnings say waiting for withdrawal, not released');
  t.same(earnings.totals, [{ token, symbol: 'bUSD', decimals: 6, pending: '0', released: '0', waitingWithdrawal: (farmShareA + farmShareB).toString() }]);
  t.same(withdrawalListSchema.parse((await app.inject({ url: '/dashboard/api/withdrawals', headers: session(operator) })).json()).data, [], "the farm's wallet, as a customer, has nothing waiting");

  // The farm's wallet withdraws once the token lets it: one withdraw(token) takes both payouts.
  await setBlocked(PAYOUT.address, BLOCK.none);
  await mined(c, c.wallet(2).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'withdraw', args: [token] }));
  t.equal(await tokenBalance(PAYOUT.address), farmShareA + farmShareB, 'the farm has both payouts');
  await scan();
  t.same(withdrawalListSchema.parse((await app.inject({ url: '/operator/api/withdrawals', headers: session(operator) })).json()).data, [], 'nothing waits for the farm');
  const settled = (await app.inject({ url: '/operator/api/earnings', headers: session(operator) })).json();
  t.same(settled.data.map((r: { state: string }) => r.state), ['released', 'released'], 'released once withdrawn');
  t.equal(settled.totals[0].released, (farmShareA + farmShareB).toString());
  t.equal(settled.totals[0].waitingWithdrawal, '0');
  t.equal((await get(a.id)).receipt?.withdrawal?.status, 'waiting_withdrawal', "the farm's withdrawal leaves the customer's refund waiting");

  const withdrawTx = await mined(c, c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'withdraw', args: [token] }));
  await scan();
  const withdrawn = (await get(a.id)).receipt?.withdrawal;
  t.match(withdrawn, { status: 'withdrawn', wallet: CUSTOMER.address.toLowerCase(), amount: customerShareA.toString(), withdrawTxHash: withdrawTx.transactionHash.toLowerCase(), withdrawnAt: /^\d{4}-/ });
  t.same(withdrawalListSchema.parse((await app.inject({ url: '/dashboard/api/withdrawals', headers: session(customer) })).json()).data, [], 'nothing waits for the customer');
});

t.test('behavior: a deferral recorded after an earlier withdrawal of the same wallet waits for the next one', async (t) => {
  const { c, app, db, escrow, token, setBlocked, completedJob, scan } = await setup(t);
  const operator = await signIn(app, devWallet(2));
  await setBlocked(PAYOUT.address, BLOCK.returnFalse);
  const first = await completedJob();
  await afterWindow(c);
  await sweepReleases({ db, escrow, startBlock: 0, now: later });
  await setBlocked(PAYOUT.address, BLOCK.none);
  await mined(c, c.wallet(2).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'withdraw', args: [token] }));
  await setBlocked(PAYOUT.address, BLOCK.returnFalse);
  const second = await completedJob();
  await afterWindow(c);
  await sweepReleases({ db, escrow, startBlock: 0, now: later });
  await scan();
  const waiting = withdrawalListSchema.parse((await app.inject({ url: '/operator/api/withdrawals', headers: session(operator) })).json()).data;
  t.same(waiting.map((w) => w.jobs.map((j) => j.jobId)), [[second.id]], 'the first withdrawal settled only what was deferred before it');
  t.equal(waiting[0]?.amount, (second.payout - second.fee).toString());
  t.not(first.id, second.id);
});

t.test('behavior: a dispute no admin resolves ends at its deadline: the worker returns the whole deposit and the control plane records it', async (t) => {
  const { c, app, db, escrow, get, tokenBalance, completedJob, scan } = await setup(t);
  const admin = await signIn(app, devWallet(1));
  const job = await completedJob();
  const dispute = await mined(c, c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [job.key] }));
  const disputedAt = (await c.publicClient.getBlock({ blockNumber: dispute.blockNumber })).timestamp;
  await scan();
  const deadline = new Date((Number(disputedAt) + DISPUTE_TIMEOUT_SECONDS) * 1000).toISOString();
  const held = await get(job.id);
  t.equal(held.receipt?.status, 'disputed');
  t.equal(held.receipt?.disputeEndsAt, deadline, "the job's receipt gives the deadline: 14 days after the dispute");
  const listed = (await app.inject({ url: '/admin/api/disputes', headers: session(admin) })).json();
  t.equal(listed.data[0]?.disputeEndsAt, deadline, "the admin's dispute table shows it");
  const timeline = (await app.inject({ url: `/dashboard/api/jobs/${job.id}/timeline`, headers: session(await signIn(app, devWallet(3))) })).json();
  t.ok(timeline.events.some((e: { state: string; at: string }) => e.state === 'dispute_deadline' && e.at === deadline), 'the timeline shows the deadline ahead');

  t.equal(await sweepDisputeTimeouts({ db, escrow, startBlock: 0 }), 0, 'nothing is due before the deadline');
  // The wall clock says the deadline passed but the chain does not: the escrow refuses, nothing is recorded.
  await t.rejects(sweepDisputeTimeouts({ db, escrow, startBlock: 0, now: later }), /DisputeDeadlineNotReached/, 'the contract enforces the deadline');
  t.equal((await get(job.id)).receipt?.status, 'disputed', 'still disputed');

  await afterWindow(c, DISPUTE_TIMEOUT_SECONDS);
  assertError(t, await app.inject({ method: 'POST', url: `/admin/api/jobs/${job.id}/resolve-dispute`, headers: { ...session(admin, { csrf: true }), 'content-type': 'application/json' }, payload: JSON.stringify({ outcome: 'release' }) }), 'conflict', 409);
  const customerBefore = await tokenBalance(CUSTOMER.address);
  t.equal(await sweepDisputeTimeouts({ db, escrow, startBlock: 0, now: later }), 1, 'the worker ends the dispute');
  t.equal(await tokenBalance(CUSTOMER.address) - customerBefore, job.deposit, 'the customer has the whole deposit back');
  t.equal(await tokenBalance(PAYOUT.address), 0n, 'nothing to the farm');
  t.match(await readEscrowJob(escrow.chain, job.key), { status: 'released', payout: 0n, fee: 0n });
  const ended = await get(job.id);
  t.match(ended.receipt, { status: 'released', amount: '0', disputeOutcome: 'timed_out', disputeEndsAt: deadline, transactions: { release: /^0x[0-9a-f]{64}$/ } }, 'recorded: released with nothing paid out, timed out');
  t.same((await app.inject({ url: '/admin/api/disputes', headers: session(admin) })).json().data, [], 'no longer an open dispute');
  const operator = await signIn(app, devWallet(2));
  const earnings = (await app.inject({ url: '/operator/api/earnings', headers: session(operator) })).json();
  t.same(earnings.data.map((r: { state: string; amount: string }) => [r.state, r.amount]), [['refunded', '0']], 'the farm earned nothing from it');
  const after = (await app.inject({ url: `/dashboard/api/jobs/${job.id}/timeline`, headers: session(await signIn(app, devWallet(3))) })).json();
  t.ok(after.events.some((e: { state: string; txHash: string | null }) => e.state === 'dispute_timed_out' && e.txHash === ended.receipt?.transactions.release), 'the timeline shows the timeout with its transaction');
  t.equal(await sweepDisputeTimeouts({ db, escrow, startBlock: 0, now: later }), 0, 'ended once');
});

t.test("behavior: the customer's own claim after the deadline is recorded from the escrow events", async (t) => {
  const { c, get, completedJob, scan, db, escrow } = await setup(t);
  const job = await completedJob();
  await mined(c, c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [job.key] }));
  await scan();
  await afterWindow(c, DISPUTE_TIMEOUT_SECONDS);
  const claim = await mined(c, c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'claimDisputeTimeout', args: [job.key] }));
  await scan();
  t.match((await get(job.id)).receipt, { status: 'released', amount: '0', disputeOutcome: 'timed_out', transactions: { release: claim.transactionHash.toLowerCase() } });
  t.equal(await sweepDisputeTimeouts({ db, escrow, startBlock: 0, now: later }), 0, 'nothing left for the worker');
});

t.test('behavior: an admin resolving before the deadline is recorded as resolved', async (t) => {
  const { c, app, get, completedJob, scan, db, escrow } = await setup(t);
  const admin = await signIn(app, devWallet(1));
  const job = await completedJob();
  await mined(c, c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [job.key] }));
  await scan();
  await resolveJobDispute({ db, escrow }, { jobId: job.id, outcome: 'release', actor: { kind: 'admin_wallet', id: devWallet(1).address.toLowerCase() } });
  t.match((await get(job.id)).receipt, { status: 'released', amount: job.payout.toString(), disputeOutcome: 'resolved' });
  t.same((await app.inject({ url: '/admin/api/disputes', headers: session(admin) })).json().data, []);
});
