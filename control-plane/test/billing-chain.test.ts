import { billingListSchema, billingSums, gpuFarmEscrowAbi, jobCreatedSchema, testStablecoinAbi, type BillingEntry } from '@gpufarm/shared';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { getAddress, parseEventLogs, type Address, type Hex } from 'viem';
import { resolveJobDispute } from '../src/admin/disputes.js';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { readEscrowJob } from '../src/chain/escrow.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { scanEscrowEvents, sweepDisputeTimeouts, sweepReleases } from '../src/jobs/escrow-worker.js';
import { recordCompletion, releaseMoney } from '../src/jobs/settlement.js';
import { bearer, createTestKey } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { buildEscrowTestApp, sendFundingCalls, startTestChain, TREASURY } from './helpers/chain.js';

/**
 * Billing a person can follow, checked against the chain: jobs of every outcome (paid out after
 * the window, approved early, refunded, disputed and resolved for the farm, for the customer, in
 * part, and timed out) on a real anvil, then each job's entries summed and compared with the
 * stablecoin transfers of their transactions, and the wallet's balance with the sums.
 */

const WINDOW_SECONDS = 600;
const chainP = startTestChain(t, { challengeWindowSeconds: WINDOW_SECONDS });
const PROVIDER = '0x000000000000000000000000000000000000beef' as const;
const CUSTOMER = getAddress(ANVIL_ACCOUNTS[3].address);

t.test('unit: a release moves the deposit less the final payout back; a lower final payout credits the charge in proportion', async (t) => {
  const job = { max_cost_micro_usd: 1_000_000, max_payment: '1000000' };
  const charged = { microUsd: 73_334, units: 73_334n };
  t.same(releaseMoney({ ...job, settlement_amount: '73334' }, charged), { credit: { microUsd: 0, units: 0n }, returned: { microUsd: 926_666, units: 926_666n } }, 'paid as charged');
  t.same(releaseMoney({ ...job, settlement_amount: '0' }, charged), { credit: { microUsd: 73_334, units: 73_334n }, returned: { microUsd: 1_000_000, units: 1_000_000n } }, 'resolved for the customer');
  t.same(releaseMoney({ ...job, settlement_amount: '36667' }, charged), { credit: { microUsd: 36_667, units: 36_667n }, returned: { microUsd: 963_333, units: 963_333n } }, 'half');
  // ETH: micro-USD at the job's terms, token units exact.
  const eth = releaseMoney({ max_cost_micro_usd: 2_000_000, max_payment: '666666666666667', settlement_amount: '111111111111111' }, { microUsd: 333_334, units: 111_111_444_444_445n });
  t.same(eth.returned.units, 555_555_555_555_556n);
  t.ok(eth.credit.microUsd >= 0 && eth.credit.microUsd <= 1, 'a payout a few wei below the charge credits at most a rounding micro-USD');
});

t.test('behavior: for jobs of every outcome, the billing entries add up to the chain: deposits, charges less credits, and what came back to the wallet', async (t) => {
  const c = await chainP;
  const test = await buildEscrowTestApp(t, c);
  const { db, escrow, app } = test;
  const farm = await createFarm(db);
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await test.offerIndex.refresh();
  const { key } = await createTestKey(db, { walletAddress: CUSTOMER.toLowerCase() });
  const coin = c.deployment.stablecoin!.address;
  const balance = () => c.publicClient.readContract({ address: coin, abi: testStablecoinAbi, functionName: 'balanceOf', args: [CUSTOMER] });
  const before = await balance();

  const send = async (functionName: 'approve' | 'dispute' | 'claimRefund', jobKey: Hex) => {
    const hash = await c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName, args: [jobKey] });
    await c.publicClient.waitForTransactionReceipt({ hash });
  };
  const scan = () => scanEscrowEvents({ db, escrow, startBlock: 0 });
  const funded = async (title: string) => {
    const res = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { title, image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxRuntimeSeconds: 3600, paymentToken: 'stable' } });
    const created = jobCreatedSchema.parse(res.json());
    const tx = (await sendFundingCalls(c, c.wallet(3), created.funding!.calls)).at(-1)!;
    t.equal((await app.inject({ method: 'POST', url: `/v1/jobs/${created.job.id}/fund-confirm`, headers: bearer(key), payload: { txHash: tx } })).statusCode, 200, `${title}: funded`);
    return { id: created.job.id, key: created.job.payment.escrowJobKey as Hex, title };
  };
  const complete = (job: { id: string }, runtimeSeconds: number) =>
    recordCompletion({ db, escrow }, { jobId: job.id, runtimeSeconds, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'ab'.repeat(32)}`, provider: PROVIDER });
  const admin = { kind: 'admin_token', id: 'GF_ADMIN_TOKEN' } as const;

  const released = await funded('paid out after the window');
  await complete(released, 600);
  const approved = await funded('approved early');
  await complete(approved, 120);
  await send('approve', approved.key);
  const refunded = await funded('canceled and refunded');
  t.equal((await app.inject({ method: 'POST', url: `/v1/jobs/${refunded.id}/cancel`, headers: bearer(key), payload: {} })).statusCode, 200, 'canceled');
  await send('claimRefund', refunded.key);
  const forFarm = await funded('dispute resolved for the farm');
  const forCustomer = await funded('dispute resolved for the customer');
  const inPart = await funded('dispute resolved in part');
  const timedOut = await funded('dispute timed out');
  const charges = new Map<string, number>();
  for (const job of [forFarm, forCustomer, inPart, timedOut]) {
    charges.set(job.id, (await complete(job, 900)).cost.totalMicroUsd);
    await send('dispute', job.key);
  }
  await scan();
  await resolveJobDispute({ db, escrow }, { jobId: forFarm.id, outcome: 'release', actor: admin });
  await resolveJobDispute({ db, escrow }, { jobId: forCustomer.id, outcome: 'refund', actor: admin });
  // An operator's resolution of its own amounts, seen by the event scan: a third of the payout.
  const held = await readEscrowJob(escrow.chain, inPart.key);
  const partial = await c.wallet(0).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'resolveDispute', args: [inPart.key, held.payout / 3n, held.fee / 3n] });
  await c.publicClient.waitForTransactionReceipt({ hash: partial });
  await scan();
  // Past the window and the dispute deadline (14 days): the sweeps release and end the rest.
  await c.testClient.increaseTime({ seconds: 15 * 24 * 3600 });
  await c.testClient.mine({ blocks: 1 });
  const later = () => new Date(Date.now() + 15 * 24 * 3_600_000);
  t.equal(await sweepReleases({ db, escrow, startBlock: 0, now: later }), 1, 'the undisputed job is released');
  t.equal(await sweepDisputeTimeouts({ db, escrow, startBlock: 0, now: later }), 1, 'the unresolved dispute ends');
  await scan();

  const entries: BillingEntry[] = billingListSchema.parse((await app.inject({ url: '/v1/billing?limit=200', headers: bearer(key) })).json()).data;
  const jobs = [released, approved, refunded, forFarm, forCustomer, inPart, timedOut];
  const units = (list: BillingEntry[], ...types: BillingEntry['type'][]) => list.filter((e) => types.includes(e.type)).reduce((n, e) => n + BigInt(e.amount ?? '0'), 0n);
  const transfers = async (hashes: (string | null)[], filter: (from: Address, to: Address) => boolean) => {
    let sum = 0n;
    for (const hash of new Set(hashes.filter((h): h is string => h !== null))) {
      const receipt = await c.publicClient.getTransactionReceipt({ hash: hash as Hex });
      for (const log of parseEventLogs({ abi: testStablecoinAbi, logs: receipt.logs, eventName: 'Transfer' })) {
        if (getAddress(log.address) === getAddress(coin) && filter(getAddress(log.args.from), getAddress(log.args.to))) sum += log.args.value;
      }
    }
    return sum;
  };
  const escrowAddress = getAddress(c.deployment.escrow);
  for (const job of jobs) {
    const mine = entries.filter((e) => e.jobId === job.id);
    const sums = billingSums(mine);
    const hashes = mine.map((e) => e.txHash);
    t.equal(sums.held, 0n, `${job.title}: settled, nothing left in escrow (${mine.map((e) => `${e.type} ${e.amountMicroUsd}`).join(', ')})`);
    t.equal(units(mine, 'funded'), await transfers(hashes, (from, to) => from === CUSTOMER && to === escrowAddress), `${job.title}: the deposit is the transfer into the escrow`);
    t.equal(units(mine, 'release', 'refund'), await transfers(hashes, (from, to) => from === escrowAddress && to === CUSTOMER), `${job.title}: returned is what the escrow sent the wallet`);
    t.equal(units(mine, 'charge') - units(mine, 'credit'), await transfers(hashes, (from, to) => from === escrowAddress && (to === getAddress(PROVIDER) || to === getAddress(TREASURY))), `${job.title}: charged less credited is what the farm and the fee received`);
    // The stablecoin has 6 decimals: its base units are micro-USD.
    t.equal(sums.charged, units(mine, 'charge') - units(mine, 'credit'), `${job.title}: the micro-USD charged equal its token units`);
  }
  const byTitle = (job: { id: string }) => billingSums(entries.filter((e) => e.jobId === job.id));
  t.equal(byTitle(refunded).charged, 0n, 'a refunded job is never charged');
  t.equal(byTitle(forCustomer).charged, 0n, 'a dispute resolved for the customer charges nothing: the charge is credited');
  t.equal(byTitle(timedOut).charged, 0n, 'a dispute that timed out charges nothing');
  t.equal(byTitle(forFarm).charged, BigInt(charges.get(forFarm.id)!), 'a dispute resolved for the farm charges the run in full');
  t.ok(byTitle(inPart).charged > 0n && byTitle(inPart).charged < byTitle(forFarm).charged, 'a partial resolution charges part');
  t.equal(entries.filter((e) => e.type === 'credit').length, 3, 'one credit per dispute that lowered the payout');

  const all = billingSums(entries);
  t.equal(before - (await balance()), all.funded - all.returned, 'the wallet lost exactly what was funded and not returned');
  t.equal(all.funded - all.returned, all.charged, 'which is what the jobs were charged');

  // One job's entries, as its page reads them; a malformed id is refused naming the parameter.
  const one = billingListSchema.parse((await app.inject({ url: `/v1/billing?jobId=${inPart.id}`, headers: bearer(key) })).json()).data;
  t.same(one.map((e) => e.type), ['release', 'credit', 'charge', 'funded'], 'a job resolved in part: funded, charged, credited, returned');
  const bad = await app.inject({ url: '/v1/billing?jobId=nope', headers: bearer(key) });
  assertError(t, bad, 'invalid_request', 400);
  t.match(bad.json().error.message, /jobId/);

  // Entries written before 030_billing_returns (a release of 0 carrying the payout, no credit) are
  // rewritten by it to exactly what the service writes now.
  const shape = (list: BillingEntry[]) => list.map((e) => `${e.jobId} ${e.type} ${e.amountMicroUsd} ${e.amount} ${e.txHash}`).sort();
  await db.query(`DELETE FROM billing_entries WHERE type = 'credit'`);
  await db.query(`UPDATE billing_entries b SET amount_micro_usd = 0, amount = j.settlement_amount FROM jobs j WHERE b.job_id = j.id AND b.type = 'release'`);
  await db.query(readFileSync(new URL('../migrations/030_billing_returns.sql', import.meta.url), 'utf8'));
  const migrated = billingListSchema.parse((await app.inject({ url: '/v1/billing?limit=200', headers: bearer(key) })).json()).data;
  t.same(shape(migrated), shape(entries), 'the migration backfills releases and credits as the service writes them');
});
