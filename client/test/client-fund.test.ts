import t, { type Test } from 'tap';
import { createPublicClient, createWalletClient, encodeAbiParameters, erc20Abi, http, keccak256, maxUint256, numberToHex, toFunctionSelector, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ANVIL_ACCOUNTS, createFarm, createMachine, startAnvil } from '@gpufarm/control-plane/testing';
import { chainFor } from '@gpufarm/control-plane/chain';
import { createTestKey } from '@gpufarm/control-plane/testing/app';
import { buildEscrowTestApp, startTestChain } from '@gpufarm/control-plane/testing/chain';
import { createClient, fundJob, type FundStep } from '../src/index.js';
import { failure, listening } from './helpers/control-plane.js';

/** `fundJob` against the real control plane and a real anvil with the escrow and the test stablecoin. */

const CUSTOMER = ANVIL_ACCOUNTS[1];
const chainP = startTestChain(t);

async function setup(t: Test, options: { confirmations?: number } = {}) {
  const c = await chainP;
  const s = await listening((env) => buildEscrowTestApp(t, c, { env, confirmations: options.confirmations }));
  const farm = await createFarm(s.db, { slug: 'fund-farm' });
  await createMachine(s.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 400_000 });
  await s.offerIndex.refresh();
  const { key } = await createTestKey(s.db, { walletAddress: CUSTOMER.address.toLowerCase() });
  const gf = createClient({ baseUrl: s.baseUrl, apiKey: key });
  const create = async (paymentToken: 'stable' | 'eth') => (await gf.jobs.create({ image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 1 }, maxRuntimeSeconds: 600, paymentToken })).job;
  const nonce = (address: Address) => c.publicClient.getTransactionCount({ address });
  return { c, s, gf, create, nonce };
}

t.test('behavior: a stable-token job is funded with approve then createJob, and confirmed', async (t) => {
  const { c, gf, create, nonce } = await setup(t);
  const job = await create('stable');
  const before = await nonce(CUSTOMER.address);
  const steps: FundStep[] = [];
  const confirmed = await gf.fundJob(job, c.wallet(1), { publicClient: c.publicClient, onStep: (s) => steps.push(s) });
  t.equal(confirmed.status, 'confirmed');
  t.equal(confirmed.job.status, 'QUEUED');
  t.equal((await gf.jobs.get(job.id)).status, 'QUEUED');
  t.equal((await nonce(CUSTOMER.address)) - before, 2, 'two transactions: approve and createJob');
  t.same(
    steps.map((s) => s.kind),
    ['funding', 'sent', 'mined', 'sent', 'mined', 'confirmed'],
  );
  const sent = steps.flatMap((s) => (s.kind === 'sent' ? [s.call.title] : []));
  t.match(sent[0], /^Allow the escrow/);
  t.match(sent[1], /^Fund the job's escrow/);
});

t.test('behavior: an approve the allowance already covers is skipped', async (t) => {
  const { c, gf, create, nonce } = await setup(t);
  const job = await create('stable');
  // The funding as read before the allowance grew: it still asks for the approve.
  const earlier = await gf.jobs.funding(job.id);
  t.equal(earlier.calls.length, 2, 'the server asked for an approve');
  const approve = await c.wallet(1).writeContract({ address: c.deployment.stablecoin!.address, abi: erc20Abi, functionName: 'approve', args: [c.deployment.escrow, maxUint256] });
  await c.publicClient.waitForTransactionReceipt({ hash: approve });

  const before = await nonce(CUSTOMER.address);
  const steps: FundStep[] = [];
  // The module function with a client whose funding read is the earlier one.
  const confirmed = await fundJob({ index: gf.index, jobs: { ...gf.jobs, funding: () => Promise.resolve(earlier) } }, job.id, c.wallet(1), { onStep: (s) => steps.push(s) });
  t.equal(confirmed.job.status, 'QUEUED');
  t.equal((await nonce(CUSTOMER.address)) - before, 1, 'one transaction: createJob');
  t.same(
    steps.map((s) => s.kind),
    ['funding', 'skipped', 'sent', 'mined', 'confirmed'],
  );

  // A job created now gets no approve from the server at all; funding it sends one transaction too.
  const next = await create('stable');
  const beforeNext = await nonce(CUSTOMER.address);
  t.equal((await gf.fundJob(next.id, c.wallet(1))).job.status, 'QUEUED');
  t.equal((await nonce(CUSTOMER.address)) - beforeNext, 1);
});

t.test('behavior: a funding still goes through when a release empties the escrow between the gas estimate and the send', async (t) => {
  const { c, gf, create } = await setup(t);
  const token = c.deployment.stablecoin!.address;
  // TestStablecoin's `balanceOf` is its slot 1 (the constants take none): the escrow's balance word.
  const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [c.deployment.escrow, 1n]));
  const setEscrowBalance = (amount: bigint) => c.publicClient.request({ method: 'anvil_setStorageAt' as 'eth_chainId', params: [token, slot, numberToHex(amount, { size: 32 })] as unknown as undefined });
  const held = await c.publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [c.deployment.escrow] });
  t.teardown(() => setEscrowBalance(held));
  await setEscrowBalance(1_000_000n);
  const createJobSelector = toFunctionSelector('createJob(bytes32,address,uint256,bytes32)');
  const isCreateJob = (data: Hex | undefined) => data?.slice(0, 10) === createJobSelector;

  // The mechanism: a createJob sent with its bare estimate, made while the escrow held a balance,
  // reverts once that balance is gone (transferFrom writes it from zero).
  const first = await create('stable');
  const calls = (await gf.jobs.funding(first.id)).calls;
  const wallet = c.wallet(1);
  for (const call of calls) {
    const request = { to: call.to as Address, data: call.data as Hex, value: BigInt(call.value) };
    const gas = await c.publicClient.estimateGas({ account: wallet.account, ...request });
    if (isCreateJob(request.data)) await setEscrowBalance(0n);
    const receipt = await c.publicClient.waitForTransactionReceipt({ hash: await wallet.sendTransaction({ ...request, gas }) });
    if (isCreateJob(request.data)) t.equal(receipt.status, 'reverted', 'the bare estimate runs out of gas in the token call');
    else t.equal(receipt.status, 'success');
  }

  // `fundJob` sends with headroom: the same race leaves it funded.
  await setEscrowBalance(1_000_000n);
  const racing = new Proxy(wallet, {
    get(target, key, receiver) {
      if (key !== 'sendTransaction') return Reflect.get(target, key, receiver);
      return async (request: Parameters<typeof wallet.sendTransaction>[0]) => {
        if (isCreateJob(request.data)) await setEscrowBalance(0n);
        return target.sendTransaction(request);
      };
    },
  });
  const job = await create('stable');
  t.equal((await gf.fundJob(job.id, racing, { publicClient: c.publicClient })).job.status, 'QUEUED', 'funded with the estimate and half again');
});

t.test('behavior: an ETH job is one createJob carrying the value; fund-confirm is asked again while it answers 202', async (t) => {
  const { c, gf, create, nonce } = await setup(t, { confirmations: 2 });
  const job = await create('eth');
  const before = await nonce(CUSTOMER.address);
  const balance = await c.publicClient.getBalance({ address: c.deployment.escrow });
  const steps: FundStep[] = [];
  const confirmed = await gf.fundJob(job.id, c.wallet(1), {
    onStep: (s) => {
      steps.push(s);
      // The second confirmation comes with the next block.
      if (s.kind === 'pending') void c.testClient.mine({ blocks: 1 });
    },
  });
  t.equal(confirmed.job.status, 'QUEUED');
  t.equal((await nonce(CUSTOMER.address)) - before, 1, 'one transaction');
  t.equal((await c.publicClient.getBalance({ address: c.deployment.escrow })) - balance, BigInt(job.payment.maxPayment), 'the escrow holds the value');
  const kinds = steps.map((s) => s.kind);
  t.same(kinds.slice(0, 3), ['funding', 'sent', 'mined']);
  t.ok(kinds.includes('pending'), 'fund-confirm answered 202 first');
  t.equal(kinds.at(-1), 'confirmed');
});

t.test('error: wallet_mismatch before anything is sent', async (t) => {
  const { c, gf, create, nonce } = await setup(t);
  const job = await create('stable');
  const other = ANVIL_ACCOUNTS[2].address;
  const before = [await nonce(CUSTOMER.address), await nonce(other)];
  const error = await failure(gf.fundJob(job.id, c.wallet(2), { publicClient: c.publicClient }));
  t.equal(error.code, 'wallet_mismatch');
  t.match(error.message, new RegExp(CUSTOMER.address, 'i'), 'names the signer');
  t.match(error.message, 'nothing was sent');
  t.same([await nonce(CUSTOMER.address), await nonce(other)], before, 'no transaction from either wallet');
  t.equal((await gf.jobs.get(job.id)).status, 'CREATED');
});

t.test('error: wrong_chain before anything is sent', async (t) => {
  const { gf, create, nonce } = await setup(t);
  const job = await create('eth');
  const elsewhere = await startAnvil({ chainId: 31337 });
  t.teardown(() => elsewhere.stop());
  const chain = chainFor(31337, elsewhere.rpcUrl);
  const wallet = createWalletClient({ chain, transport: http(elsewhere.rpcUrl), account: privateKeyToAccount(CUSTOMER.privateKey) });
  const elsewhereReader = createPublicClient({ chain, transport: http(elsewhere.rpcUrl) });
  const before = [await nonce(CUSTOMER.address), await elsewhereReader.getTransactionCount({ address: CUSTOMER.address })];
  const error = await failure(gf.fundJob(job.id, wallet));
  t.equal(error.code, 'wrong_chain');
  t.match(error.message, 'chain 31337');
  t.match(error.message, 'Switch the wallet to chain 4663');
  t.same([await nonce(CUSTOMER.address), await elsewhereReader.getTransactionCount({ address: CUSTOMER.address })], before, 'no transaction on either chain');
  t.equal((await gf.jobs.get(job.id)).status, 'CREATED');
});
