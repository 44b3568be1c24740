import { gpuFarmEscrowAbi, jobCreatedSchema, testStablecoinAbi } from '@gpufarm/shared';
import t from 'tap';
import { getAddress, parseEventLogs, type Address, type Hex } from 'viem';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import type { Database } from '../src/db/database.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { resolveJobDispute } from '../src/admin/disputes.js';
import { scanEscrowEvents } from '../src/jobs/escrow-worker.js';
import { recordCompletion, releaseCompleted } from '../src/jobs/settlement.js';
import { findJobById } from '../src/jobs/store.js';
import { insertAssignment } from './helpers/agent-client.js';
import { bearer, createTestKey } from './helpers/app.js';
import { buildEscrowTestApp, sendFundingCalls, startTestChain } from './helpers/chain.js';
import { contractChecked } from './helpers/fleet-contract.js';
import { devWallet, fakeWebDist, PUBLIC_URL, session, signIn } from './helpers/web.js';

/**
 * The earnings ledger against a real escrow: a farm's completed jobs, one released after its
 * challenge window, one still pending, one disputed and one refunded by an admin; the released total must be what the escrow
 * transferred to the farm's payout address.
 */
const chainP = startTestChain(t, { challengeWindowSeconds: 60 });
const payout = devWallet(2);
const RESULT = `0x${'cd'.repeat(32)}` as const;

/** The job ran on the machine: the finished assignment that produced its result. */
async function ranOn(db: Database, jobId: string, machineId: string): Promise<void> {
  const assignmentId = await insertAssignment(db, { jobId, machineId, state: 'finished' });
  await db.query('UPDATE jobs SET assignment_id = $2 WHERE id = $1', [jobId, assignmentId]);
}

t.test('behavior: released earnings equal the escrow\'s transfers to the payout address; pending ones wait in the challenge window, disputed and refunded ones are told apart; CSV has the same rows', async (t) => {
  const c = await chainP;
  const test = await buildEscrowTestApp(t, c, { env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) } });
  const { db } = test;
  const { app, checked } = contractChecked(test.app);
  const farm = await createFarm(db, { slug: 'paid-farm', payoutAddress: payout.address });
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const rivalFarm = await createFarm(db, { slug: 'rival-farm', payoutAddress: devWallet(1).address });
  const rivalMachine = await createMachine(db, { farmId: rivalFarm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await test.offerIndex.refresh();
  const customer = await createTestKey(db, { walletAddress: ANVIL_ACCOUNTS[3].address.toLowerCase() });
  const token = getAddress(c.deployment.stablecoin!.address);
  const balance = (who: Address) => c.publicClient.readContract({ address: token, abi: testStablecoinAbi, functionName: 'balanceOf', args: [who] });

  const fundedJob = async (machineId: string) => {
    const created = jobCreatedSchema.parse(
      (await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(customer.key), payload: { image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxRuntimeSeconds: 3600, paymentToken: 'stable' } })).json(),
    );
    const tx = (await sendFundingCalls(c, c.wallet(3), created.funding!.calls)).at(-1)!;
    const confirmed = await app.inject({ method: 'POST', url: `/v1/jobs/${created.job.id}/fund-confirm`, headers: bearer(customer.key), payload: { txHash: tx } });
    t.equal(confirmed.statusCode, 200, confirmed.body);
    await ranOn(db, created.job.id, machineId);
    const completed = await recordCompletion(test, { jobId: created.job.id, runtimeSeconds: 600, pricePerGpuHourMicroUsd: 400_000, resultHash: RESULT, provider: getAddress(machineId === machine.id ? payout.address : devWallet(1).address) });
    return { id: created.job.id, key: created.job.payment.escrowJobKey as Hex, payout: completed.payout, fee: completed.fee };
  };

  const released = await fundedJob(machine.id);
  await fundedJob(rivalMachine.id);
  await c.testClient.increaseTime({ seconds: 61 });
  await c.testClient.mine({ blocks: 1 });
  const before = await balance(payout.address);
  const fromBlock = (await c.publicClient.getBlockNumber({ cacheTime: 0 })) + 1n;
  await releaseCompleted(test, (await findJobById(db, released.id))!);
  const pending = await fundedJob(machine.id);
  // Two more the customer disputes inside the window; an admin refunds one.
  const disputed = await fundedJob(machine.id);
  const refunded = await fundedJob(machine.id);
  for (const job of [disputed, refunded]) {
    await c.publicClient.waitForTransactionReceipt({ hash: await c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [job.key] }) });
  }
  await scanEscrowEvents({ db, escrow: test.escrow, startBlock: 0 });
  await resolveJobDispute({ db, escrow: test.escrow }, { jobId: refunded.id, outcome: 'refund', actor: { kind: 'admin_wallet', id: devWallet(1).address.toLowerCase() } });

  // What the chain says the payout address received: the token's Transfer logs to it, and its balance.
  const logs = await c.publicClient.getContractEvents({ address: token, abi: testStablecoinAbi, eventName: 'Transfer', fromBlock, toBlock: 'latest' });
  const transfers = parseEventLogs({ abi: testStablecoinAbi, logs, eventName: 'Transfer' }).filter((l) => getAddress(l.args.to) === getAddress(payout.address));
  const onChain = transfers.reduce((sum, l) => sum + l.args.value, 0n);
  t.equal(await balance(payout.address) - before, onChain, 'the transfers are all the payout address got');
  t.equal(onChain, released.payout - released.fee, 'the escrow paid the farm payout - fee');
  t.ok(onChain > 0n);

  const me = await signIn(app, payout);
  const ledger = await app.inject({ url: '/operator/api/earnings', headers: session(me) });
  t.equal(ledger.statusCode, 200, ledger.body);
  const { data, totals, nextCursor } = ledger.json();
  t.equal(nextCursor, null);
  t.same(
    data.map((r: { jobId: string; state: string; amount: string }) => [r.jobId, r.state, r.amount]),
    [[refunded.id, 'refunded', '0'], [disputed.id, 'disputed', (disputed.payout - disputed.fee).toString()], [pending.id, 'pending', (pending.payout - pending.fee).toString()], [released.id, 'released', onChain.toString()]],
    'its jobs, newest first; the rival farm\'s job is not there',
  );
  const releasedRow = data.find((r: { jobId: string }) => r.jobId === released.id);
  const releaseTx = (await findJobById(db, released.id))!.release_tx_hash;
  t.match(releasedRow, {
    machineId: machine.id, token: token.toLowerCase(), symbol: 'tUSDC', decimals: 6, amount: onChain.toString(), fee: released.fee.toString(),
    challengeEndsAt: /^\d{4}-/, releasedAt: /^\d{4}-/, releaseTxHash: releaseTx,
  });
  t.ok(releaseTx, 'the release transaction is recorded');
  t.same(totals, [{ token: token.toLowerCase(), symbol: 'tUSDC', decimals: 6, pending: (pending.payout - pending.fee).toString(), released: onChain.toString(), waitingWithdrawal: '0' }], 'released total = on-chain transfers');

  const byDay = (await app.inject({ url: '/operator/api/earnings?groupBy=day', headers: session(me) })).json().data;
  t.same(byDay.map((r: { state: string; amount: string }) => [r.state, r.amount]).sort(), [['disputed', (disputed.payout - disputed.fee).toString()], ['pending', (pending.payout - pending.fee).toString()], ['refunded', '0'], ['released', onChain.toString()]]);
  const byMachine = (await app.inject({ url: '/operator/api/earnings?groupBy=machine', headers: session(me) })).json().data;
  t.same(byMachine.map((r: { machineId: string }) => r.machineId), [machine.id, machine.id, machine.id, machine.id], 'one row per machine and state');
  const paged = await app.inject({ url: '/operator/api/earnings?limit=3', headers: session(me) });
  const rest = await app.inject({ url: `/operator/api/earnings?limit=3&cursor=${paged.json().nextCursor}`, headers: session(me) });
  t.same([...paged.json().data, ...rest.json().data].map((r: { jobId: string }) => r.jobId), [refunded.id, disputed.id, pending.id, released.id], 'pages walk the ledger');
  t.equal(rest.json().nextCursor, null);
  const future = await app.inject({ url: `/operator/api/earnings?from=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`, headers: session(me) });
  t.same(future.json(), { object: 'list', data: [], nextCursor: null, totals: [] }, 'from filters by completion time');

  const csv = await app.inject({ url: '/operator/api/earnings.csv', headers: session(me) });
  t.equal(csv.statusCode, 200);
  t.match(csv.headers['content-type'], /^text\/csv/);
  const lines = csv.body.split('\r\n');
  t.equal(lines[0], 'jobId,machineId,day,token,symbol,decimals,amount,fee,state,completedAt,challengeEndsAt,releasedAt,releaseTxHash');
  t.equal(lines.length, 6, 'header, four rows, the final line end');
  t.match(lines[4], new RegExp(`^${released.id},${machine.id},\\d{4}-\\d{2}-\\d{2},${token.toLowerCase()},tUSDC,6,${onChain},${released.fee},released,`));

  // The job's own page: its run on the machine, the result, and the same row of the ledger.
  const view = await app.inject({ url: `/operator/api/jobs/${released.id}`, headers: session(me) });
  t.equal(view.statusCode, 200, view.body);
  t.match(view.json(), {
    jobId: released.id,
    resultHash: RESULT,
    completionTxHash: /^0x[0-9a-f]{64}$/,
    runs: [{ attempt: 1, machineId: machine.id, result: true }],
    earning: { jobId: released.id, state: 'released', amount: onChain.toString(), releaseTxHash: releaseTx },
  });
  t.equal(view.json().runs.length, 1);
  const rivalJob = (await db.query<{ job_id: string }>('SELECT a.job_id FROM assignments a WHERE a.machine_id = $1', [rivalMachine.id]))[0]!.job_id;
  const notOurs = await app.inject({ url: `/operator/api/jobs/${rivalJob}`, headers: session(me) });
  t.equal(notOurs.statusCode, 404, "another farm's job is not told");
  t.equal((await app.inject({ url: '/operator/api/jobs/nope', headers: session(me) })).statusCode, 400, 'a malformed id is refused');
  t.ok(checked() >= 5, `${checked()} earnings and job answers parsed by the fleet contract (shared/src/fleet/api.ts)`);
});
