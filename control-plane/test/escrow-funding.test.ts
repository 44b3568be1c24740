import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import {
  billingListSchema,
  fundConfirmPendingSchema,
  fundConfirmResponseSchema,
  fundingSchema,
  jobCreatedSchema,
  jobSchema,
  type Funding,
  type JobCreated,
} from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { encodeFunctionData, getAddress, zeroAddress, type Hash, type Hex } from 'viem';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { gpuFarmEscrowAbi, gpuFarmEscrowBytecode } from '@gpufarm/shared';
import { readEscrowJob } from '../src/chain/escrow.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import type { Database } from '../src/db/database.js';
import { escrowJobId } from '../src/jobs/escrow-key.js';
import { scanEscrowEvents, sweepRefunds } from '../src/jobs/escrow-worker.js';
import { bearer, createTestKey } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { buildEscrowTestApp, OPERATOR, sendFundingCalls, startTestChain, TREASURY, type TestChain } from './helpers/chain.js';

const run = promisify(execFile);
const CAST = join(dirname(createRequire(import.meta.url).resolve('@foundry-rs/cast-linux-amd64/package.json')), 'bin', 'cast');
const CUSTOMER = ANVIL_ACCOUNTS[1];
const OTHER = ANVIL_ACCOUNTS[2];

// One anvil for this file (real chain, free port, chain id 4663); a fresh database per test.
const chainP = startTestChain(t);

async function smallFleet(db: Database): Promise<void> {
  const farm = await createFarm(db, { slug: 'north-farm' });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 400_000 });
}

async function setup(t: Test, options: { confirmations?: number } = {}) {
  const c = await chainP;
  const app = await buildEscrowTestApp(t, c, options);
  await smallFleet(app.db);
  await app.offerIndex.refresh();
  const { key } = await createTestKey(app.db, { walletAddress: CUSTOMER.address.toLowerCase() });
  const create = async (paymentToken: 'eth' | 'stable', extra: Record<string, unknown> = {}): Promise<JobCreated> => {
    const res = await app.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 1 }, maxRuntimeSeconds: 600, paymentToken, ...extra } });
    t.equal(res.statusCode, 201, `created a ${paymentToken} job`);
    return jobCreatedSchema.parse(res.json());
  };
  const confirm = (jobId: string, txHash: string) => app.app.inject({ method: 'POST', url: `/v1/jobs/${jobId}/fund-confirm`, headers: bearer(key), payload: { txHash } });
  const get = async (jobId: string) => jobSchema.parse((await app.app.inject({ url: `/v1/jobs/${jobId}`, headers: bearer(key) })).json());
  return { c, ...app, key, create, confirm, get };
}

/** cast send <to> <data> --value <value>, as an independent client would. */
async function castSend(c: TestChain, privateKey: string, call: Funding['calls'][number]): Promise<Hash> {
  const { stdout } = await run(CAST, ['send', '--rpc-url', c.anvil.rpcUrl, '--private-key', privateKey, '--json', call.to, call.data, '--value', call.value]);
  const receipt = JSON.parse(stdout) as { transactionHash: Hash; status: string };
  return receipt.transactionHash;
}

t.test('default: a stablecoin job is funded with the calls exactly as returned, sent with viem, and queued', async (t) => {
  const { c, app, key, create, confirm, escrow } = await setup(t);
  const created = await create('stable');
  const { job, funding } = created;
  t.equal(created.fundingUnavailable, null);
  t.ok(funding, 'funding calls are returned');
  t.equal(funding!.signer, getAddress(CUSTOMER.address), "the signer is the key owner's wallet");
  t.same(funding!.calls.map((call) => call.to.toLowerCase()), [c.deployment.stablecoin!.address.toLowerCase(), c.deployment.escrow.toLowerCase()], 'approve, then createJob');
  t.same(funding!.calls.map((call) => call.value), ['0', '0']);
  t.equal(job.payment.token, c.deployment.stablecoin!.address.toLowerCase());
  t.equal(job.payment.symbol, 'tUSDC');
  t.equal(job.payment.maxPayment, String(job.pricing.maxCostMicroUsd), 'stablecoin base units are micro-USD');

  const again = await app.inject({ url: `/v1/jobs/${job.id}/funding`, headers: bearer(key) });
  t.equal(again.statusCode, 200);
  t.same(fundingSchema.parse(again.json()), funding, 'GET funding returns the same object');

  const createTx = (await sendFundingCalls(c, c.wallet(1), funding!.calls)).at(-1);
  const res = await confirm(job.id, createTx!);
  t.equal(res.statusCode, 200);
  const confirmed = fundConfirmResponseSchema.parse(res.json());
  t.equal(confirmed.status, 'confirmed');
  t.equal(confirmed.job.status, 'QUEUED', 'FUNDED, then QUEUED');
  t.match(confirmed.message, /queued/);

  const onChain = await readEscrowJob(escrow.chain, job.payment.escrowJobKey as Hex);
  t.equal(onChain.status, 'funded');
  t.equal(onChain.amount, BigInt(job.payment.maxPayment));

  const twice = await confirm(job.id, createTx!);
  t.equal(twice.statusCode, 200, 'confirming twice answers the same');
  t.equal(fundConfirmResponseSchema.parse(twice.json()).job.status, 'QUEUED');
  const billing = billingListSchema.parse((await app.inject({ url: '/v1/billing', headers: bearer(key) })).json());
  t.same(billing.data.map((e) => [e.type, e.jobId, e.amount, e.txHash]), [['funded', job.id, job.payment.maxPayment, createTx!.toLowerCase()]], 'one funded entry');
  t.equal(billing.data[0]!.amountMicroUsd, job.pricing.maxCostMicroUsd);

  const stale = await app.inject({ url: `/v1/jobs/${job.id}/funding`, headers: bearer(key) });
  assertError(t, stale, 'conflict', 409);

  // The allowance left over from another approve covers the next job: its approve is left out.
  await c.publicClient.waitForTransactionReceipt({
    hash: await c.wallet(1).sendTransaction({ to: funding!.calls[0]!.to as Hex, data: encodeFunctionData({ abi: [{ type: 'function', name: 'approve', stateMutability: 'nonpayable', inputs: [{ type: 'address', name: 's' }, { type: 'uint256', name: 'a' }], outputs: [{ type: 'bool', name: '' }] }], functionName: 'approve', args: [c.deployment.escrow, 10n ** 12n] }) }),
  });
  const covered = await create('stable');
  t.same(covered.funding!.calls.map((call) => call.title.split(' ')[0]), ['Fund'], 'only createJob when the allowance covers maxPayment');
});

t.test('default: an ETH job is funded with one createJob carrying value, sent with viem, and queued', async (t) => {
  const { c, create, confirm } = await setup(t);
  const { job, funding } = await create('eth');
  t.equal(funding!.calls.length, 1);
  t.equal(funding!.calls[0]!.value, job.payment.maxPayment, 'value is maxPayment in wei');
  t.equal(job.payment.token, zeroAddress);
  const [tx] = await sendFundingCalls(c, c.wallet(1), funding!.calls);
  const res = await confirm(job.id, tx!);
  t.equal(res.statusCode, 200);
  t.equal(fundConfirmResponseSchema.parse(res.json()).job.status, 'QUEUED');
});

t.test('behavior: the same calls sent by foundry cast (cast send <to> <data> --value <value>) fund both tokens', async (t) => {
  const { c, create, confirm } = await setup(t);
  for (const token of ['stable', 'eth'] as const) {
    const { job, funding } = await create(token, { title: `cast ${token}` });
    let last: Hash | undefined;
    for (const call of funding!.calls) last = await castSend(c, CUSTOMER.privateKey, call);
    const res = await confirm(job.id, last!);
    t.equal(res.statusCode, 200, `${token}: confirmed`);
    t.equal(res.json().job.status, 'QUEUED');
  }
});

t.test('behavior: two concurrent confirmations of one transaction move the job once', async (t) => {
  const { c, app, key, create, confirm, db } = await setup(t);
  const { job, funding } = await create('eth');
  const [tx] = await sendFundingCalls(c, c.wallet(1), funding!.calls);
  const answers = await Promise.all([confirm(job.id, tx!), confirm(job.id, tx!), confirm(job.id, tx!)]);
  t.same(answers.map((r) => r.statusCode), [200, 200, 200]);
  t.same(answers.map((r) => r.json().job.status), ['QUEUED', 'QUEUED', 'QUEUED']);
  const [credits] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM escrow_credits WHERE job_id = $1', [job.id]);
  t.equal(credits?.n, 1, 'one credit');
  const billing = (await app.inject({ url: '/v1/billing', headers: bearer(key) })).json();
  t.equal(billing.data.length, 1, 'one funded entry');
});

t.test('error: funding_mismatch names each mismatched field', async (t) => {
  const { c, create, confirm } = await setup(t);

  // Another wallet sends the job's calls: the escrow key derives from the sender, so it is not the key owner's funding.
  const wrongWallet = await create('eth');
  const [fromOther] = await sendFundingCalls(c, c.wallet(2), wrongWallet.funding!.calls);
  let res = await confirm(wrongWallet.job.id, fromOther!);
  assertError(t, res, 'funding_mismatch', 422);
  t.same(res.json().error.details.map((d: { field: string }) => d.field), ['customer'], 'wrong wallet: customer');
  t.match(res.json().error.message, new RegExp(OTHER.address, 'i'));

  // The right wallet, the wrong amount (the job hash still matches).
  const wrongAmount = await create('eth');
  const terms = (j: JobCreated) => ({ id: escrowJobId(j.job.id), hash: decodeHash(j.funding!) });
  const half = BigInt(wrongAmount.job.payment.maxPayment) / 2n;
  const [amountTx] = await sendFundingCalls(c, c.wallet(1), [
    { title: 'x', to: c.deployment.escrow, value: half.toString(), data: encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [terms(wrongAmount).id, zeroAddress, half, terms(wrongAmount).hash] }) },
  ]);
  res = await confirm(wrongAmount.job.id, amountTx!);
  assertError(t, res, 'funding_mismatch', 422);
  t.same(res.json().error.details.map((d: { field: string }) => d.field), ['amount'], 'wrong amount: amount');

  // A stablecoin job paid in ETH: the token differs.
  const wrongToken = await create('stable');
  const max = BigInt(wrongToken.job.payment.maxPayment);
  const [tokenTx] = await sendFundingCalls(c, c.wallet(1), [
    { title: 'x', to: c.deployment.escrow, value: max.toString(), data: encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [terms(wrongToken).id, zeroAddress, max, terms(wrongToken).hash] }) },
  ]);
  res = await confirm(wrongToken.job.id, tokenTx!);
  assertError(t, res, 'funding_mismatch', 422);
  t.same(res.json().error.details.map((d: { field: string }) => d.field), ['token'], 'wrong token: token');

  // Another job's terms in this job's escrow slot: the job hash differs.
  const wrongHash = await create('eth');
  const [hashTx] = await sendFundingCalls(c, c.wallet(1), [
    { ...wrongHash.funding!.calls[0]!, data: encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [terms(wrongHash).id, zeroAddress, BigInt(wrongHash.job.payment.maxPayment), `0x${'11'.repeat(32)}`] }) },
  ]);
  res = await confirm(wrongHash.job.id, hashTx!);
  assertError(t, res, 'funding_mismatch', 422);
  t.same(res.json().error.details.map((d: { field: string }) => d.field), ['jobHash'], 'wrong terms: jobHash');
});

t.test('error: funding_mismatch for an event from another contract, another job, a reverted transaction, a used transaction', async (t) => {
  const { c, create, confirm } = await setup(t);

  // A look-alike escrow emits the same JobFunded event.
  const deployTx = await c.wallet(1).deployContract({ abi: gpuFarmEscrowAbi, bytecode: gpuFarmEscrowBytecode, args: [OPERATOR.address, TREASURY, 60n] });
  const impostor = (await c.publicClient.waitForTransactionReceipt({ hash: deployTx })).contractAddress!;
  const fake = await create('eth');
  const [fakeTx] = await sendFundingCalls(c, c.wallet(1), [{ ...fake.funding!.calls[0]!, to: impostor }]);
  let res = await confirm(fake.job.id, fakeTx!);
  assertError(t, res, 'funding_mismatch', 422);
  t.same(res.json().error.details.map((d: { field: string }) => d.field), ['contract'], 'another contract: contract');

  // Job A's transaction offered for job B, before and after A used it.
  const a = await create('eth');
  const b = await create('eth');
  const [aTx] = await sendFundingCalls(c, c.wallet(1), a.funding!.calls);
  res = await confirm(b.job.id, aTx!);
  assertError(t, res, 'funding_mismatch', 422);
  t.same(res.json().error.details.map((d: { field: string }) => d.field), ['jobKey'], "another job's transaction: jobKey");
  t.equal((await confirm(a.job.id, aTx!)).statusCode, 200, 'A is funded by it');
  res = await confirm(b.job.id, aTx!);
  assertError(t, res, 'funding_mismatch', 422);
  t.equal(res.json().error.details[0].field, 'jobKey', 'a used transaction cannot be replayed for another job');

  // createJob for a stablecoin without the approve: mined, reverted.
  const reverted = await create('stable');
  const createCall = reverted.funding!.calls.at(-1)!;
  const hash = await c.wallet(3).sendTransaction({ to: createCall.to as Hex, data: createCall.data as Hex, value: 0n, gas: 300_000n });
  t.equal((await c.publicClient.waitForTransactionReceipt({ hash })).status, 'reverted');
  res = await confirm(reverted.job.id, hash);
  assertError(t, res, 'funding_mismatch', 422);
  t.same(res.json().error.details.map((d: { field: string }) => d.field), ['status'], 'reverted: status');

  // Bad input is the spec's envelope naming the field.
  res = await confirm(reverted.job.id, '0x1234');
  assertError(t, res, 'invalid_request', 400);
  t.equal(res.json().error.details[0].field, 'txHash');
});

t.test('behavior: a transaction not mined yet, or short of confirmations, answers 202 with Retry-After', async (t) => {
  const { c, create, confirm } = await setup(t, { confirmations: 3 });
  const { job, funding } = await create('eth');
  let res = await confirm(job.id, `0x${'ab'.repeat(32)}`);
  t.equal(res.statusCode, 202, 'unknown transaction: pending');
  t.equal(res.headers['retry-after'], '2');
  t.equal(fundConfirmPendingSchema.parse(res.json()).confirmations, 0);

  const [tx] = await sendFundingCalls(c, c.wallet(1), funding!.calls);
  res = await confirm(job.id, tx!);
  t.equal(res.statusCode, 202, 'one of three confirmations');
  t.ok(res.headers['retry-after']);
  const pending = fundConfirmPendingSchema.parse(res.json());
  t.equal(pending.confirmations, 1);
  t.equal(pending.requiredConfirmations, 3);
  t.equal(pending.job.status, 'CREATED');
  await c.testClient.mine({ blocks: 2 });
  res = await confirm(job.id, tx!);
  t.equal(res.statusCode, 200, 'three confirmations: confirmed');
  t.equal(res.json().job.status, 'QUEUED');
});

t.test('behavior: cancel after funding authorizes the refund; the customer claims it; the receipt shows the refund', async (t) => {
  const { c, app, key, create, confirm, get, db, escrow } = await setup(t);
  const { job, funding } = await create('stable');
  // The first test left an allowance behind, so this may be createJob alone: the last call is the funding.
  const tx = (await sendFundingCalls(c, c.wallet(1), funding!.calls)).at(-1);
  t.equal((await confirm(job.id, tx!)).statusCode, 200);
  const canceled = await app.inject({ method: 'POST', url: `/v1/jobs/${job.id}/cancel`, headers: bearer(key), payload: { reason: 'changed my mind' } });
  t.equal(canceled.statusCode, 200);
  const after = jobSchema.parse(canceled.json());
  t.equal(after.status, 'CANCELED');
  t.equal(after.receipt?.status, 'refund_authorized');
  t.same(after.receipt?.transactions, { fund: tx!.toLowerCase(), completion: null, release: null, refund: null });
  t.equal((await readEscrowJob(escrow.chain, job.payment.escrowJobKey as Hex)).status, 'refund_authorized');

  const claim = await c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'claimRefund', args: [job.payment.escrowJobKey as Hex] });
  await c.publicClient.waitForTransactionReceipt({ hash: claim });
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  const refunded = await get(job.id);
  t.equal(refunded.receipt?.status, 'refunded');
  t.equal(refunded.receipt?.transactions.refund, claim.toLowerCase(), 'receipt.transactions.refund is the claim');
  const billing = billingListSchema.parse((await app.inject({ url: '/v1/billing', headers: bearer(key) })).json());
  t.same(billing.data.map((e) => e.type), ['refund', 'funded']);
});

t.test('behavior: funding that arrives after a cancel while CREATED is recorded and refunded, never lost', async (t) => {
  const { c, app, key, create, confirm, get, db, escrow } = await setup(t);
  const cancel = (id: string) => app.inject({ method: 'POST', url: `/v1/jobs/${id}/cancel`, headers: bearer(key), payload: {} });

  // Told through fund-confirm.
  const first = await create('eth');
  t.equal((await cancel(first.job.id)).json().status, 'CANCELED');
  const [tx1] = await sendFundingCalls(c, c.wallet(1), first.funding!.calls);
  const res = await confirm(first.job.id, tx1!);
  assertError(t, res, 'conflict', 409);
  t.match(res.json().error.message, /refund/);
  const [row] = await db.query<{ refund_status: string; fund_tx_hash: string }>('SELECT refund_status, fund_tx_hash FROM jobs WHERE id = $1', [first.job.id]);
  t.equal(row?.fund_tx_hash, tx1!.toLowerCase(), 'the funding is recorded');
  await sweepRefunds({ db, escrow, startBlock: 0 });
  t.equal((await get(first.job.id)).receipt?.status, 'refund_authorized');

  // Nobody tells us: the escrow worker's event scan finds it.
  const second = await create('eth');
  await cancel(second.job.id);
  const [tx2] = await sendFundingCalls(c, c.wallet(1), second.funding!.calls);
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  await sweepRefunds({ db, escrow, startBlock: 0 });
  const seen = await get(second.job.id);
  t.equal(seen.status, 'CANCELED');
  t.equal(seen.receipt?.status, 'refund_authorized');
  t.equal(seen.receipt?.transactions.fund, tx2!.toLowerCase());
  t.equal((await readEscrowJob(escrow.chain, second.job.payment.escrowJobKey as Hex)).status, 'refund_authorized');
});

/** The job hash inside a createJob call's data. */
function decodeHash(funding: Funding): Hex {
  const data = funding.calls.at(-1)!.data;
  return `0x${data.slice(-64)}`;
}

t.test('behavior: creating an ETH job makes no chain request; a stablecoin job reads the allowance once', async (t) => {
  const c = await chainP;
  // A counting proxy in front of anvil sees every JSON-RPC call the control plane makes.
  const methods: string[] = [];
  const proxy = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const calls = ([] as { method: string }[]).concat(JSON.parse(body) as { method: string });
      methods.push(...calls.map((call) => call.method));
      fetch(c.anvil.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        .then(async (answer) => res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text()))
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => proxy.close(() => resolve())));
  const proxied = { ...c, anvil: { ...c.anvil, rpcUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` } };
  const { app, db, offerIndex } = await buildEscrowTestApp(t, proxied);
  await smallFleet(db);
  await offerIndex.refresh();
  const { key } = await createTestKey(db, { walletAddress: CUSTOMER.address.toLowerCase() });
  const create = (paymentToken: string) =>
    app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, paymentToken } });
  methods.length = 0;
  t.equal((await create('eth')).statusCode, 201);
  t.same(methods, [], 'no RPC round trip for an ETH job');
  t.equal((await create('stable')).statusCode, 201);
  t.same(methods, ['eth_call'], 'one allowance read for a stablecoin job');
});
