import t from 'tap';
import { keccak256, stringToHex, zeroAddress, type Hex } from 'viem';
import { ANVIL_ACCOUNTS } from '../src/chain/anvil.js';
import { gpuFarmEscrowAbi, testStablecoinAbi } from '@gpufarm/shared';
import { authorizeRefund, completeJob, readEscrowJob, releaseJob, resolveDispute } from '../src/chain/escrow.js';
import { escrowJobKey } from '../src/jobs/escrow-key.js';
import { escrowDepsFor, startTestChain, TREASURY, type TestChain } from './helpers/chain.js';

// One anvil for the file; each test uses fresh job ids.
const chainP = startTestChain(t, { challengeWindowSeconds: 600 });
const PROVIDER = '0x00000000000000000000000000000000000fa12e' as const;
const CUSTOMER = ANVIL_ACCOUNTS[1].address;
let n = 0;
const jobIdBytes = () => keccak256(stringToHex(`job_contract_test_${n++}`));
const HASH = keccak256(stringToHex('terms'));
const RESULT = `0x${'ab'.repeat(32)}` as Hex;

async function fundEth(c: TestChain, amount: bigint) {
  const jobId = jobIdBytes();
  const hash = await c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobId, zeroAddress, amount, HASH], value: amount });
  await c.publicClient.waitForTransactionReceipt({ hash });
  return keccak256(`0x${CUSTOMER.slice(2).toLowerCase().padStart(64, '0')}${jobId.slice(2)}`) as Hex;
}

async function fundStable(c: TestChain, amount: bigint) {
  const token = c.deployment.stablecoin!.address;
  const jobId = jobIdBytes();
  const w = c.wallet(1);
  await c.publicClient.waitForTransactionReceipt({ hash: await w.writeContract({ address: token, abi: testStablecoinAbi, functionName: 'approve', args: [c.deployment.escrow, amount] }) });
  await c.publicClient.waitForTransactionReceipt({ hash: await w.writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobId, token, amount, HASH] }) });
  return keccak256(`0x${CUSTOMER.slice(2).toLowerCase().padStart(64, '0')}${jobId.slice(2)}`) as Hex;
}

const balance = (c: TestChain, who: `0x${string}`) =>
  c.publicClient.readContract({ address: c.deployment.stablecoin!.address, abi: testStablecoinAbi, functionName: 'balanceOf', args: [who] });

/** Sends a transaction expected to revert; resolves to the revert's error name. */
async function reverts(c: TestChain, index: 0 | 1 | 2, functionName: 'release' | 'claimRefund' | 'approve' | 'dispute' | 'authorizeRefund', key: Hex): Promise<string> {
  try {
    await c.publicClient.simulateContract({ account: c.wallet(index).account, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName, args: [key] });
    return 'did not revert';
  } catch (err) {
    return /reverted with the following reason:\s*\n?\s*(\w+)|Error: (\w+)\(/.exec((err as Error).message)?.slice(1).find(Boolean) ?? (err as Error).message.split('\n')[0]!;
  }
}

t.test('behavior: the contract derives the same job key as the control plane', async (t) => {
  const c = await chainP;
  const id = 'job_abcdefghijklmnopqrstuvwxyz';
  const onChain = await c.publicClient.readContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'jobKeyOf', args: [CUSTOMER, keccak256(stringToHex(id))] });
  t.equal(onChain, escrowJobKey(CUSTOMER, id));
});

t.test('behavior: release after the window splits exactly: provider payout minus fee, treasury the fee, customer the rest', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const key = await fundStable(c, 10_000_000n);
  const before = { customer: await balance(c, CUSTOMER), treasury: await balance(c, TREASURY), provider: await balance(c, PROVIDER) };
  const { challengeEndsAt } = await completeJob(escrow.chain, { jobKey: key, payout: 7_333_334n, fee: 666_667n, computeSeconds: 3600, resultHash: RESULT, provider: PROVIDER });
  t.ok(challengeEndsAt.getTime() > Date.now() - 60_000, 'the window ends in the future');
  t.equal(await reverts(c, 2, 'release', key), 'ChallengeWindowOpen', 'nobody releases inside the window');
  await c.testClient.increaseTime({ seconds: 601 });
  await c.testClient.mine({ blocks: 1 });
  await releaseJob(escrow.chain, key);
  t.equal(await balance(c, PROVIDER) - before.provider, 6_666_667n, 'provider: payout minus fee');
  t.equal(await balance(c, TREASURY) - before.treasury, 666_667n, 'treasury: the fee');
  t.equal(await balance(c, CUSTOMER) - before.customer, 2_666_666n, 'customer: the rest of the deposit');
  t.equal(await balance(c, c.deployment.escrow), 0n, 'nothing stays in the escrow');
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'released');
  t.equal(await reverts(c, 0, 'release', key), 'WrongStatus', 'a second release is impossible');
});

t.test('behavior: ETH release pays the same split in wei', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const key = await fundEth(c, 10n ** 18n);
  const treasuryBefore = await c.publicClient.getBalance({ address: TREASURY });
  const providerBefore = await c.publicClient.getBalance({ address: PROVIDER });
  await completeJob(escrow.chain, { jobKey: key, payout: 5n * 10n ** 17n, fee: 10n ** 17n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  await c.testClient.increaseTime({ seconds: 601 });
  await c.testClient.mine({ blocks: 1 });
  await releaseJob(escrow.chain, key);
  t.equal((await c.publicClient.getBalance({ address: PROVIDER })) - providerBefore, 4n * 10n ** 17n);
  t.equal((await c.publicClient.getBalance({ address: TREASURY })) - treasuryBefore, 10n ** 17n);
  t.equal(await c.publicClient.getBalance({ address: c.deployment.escrow }), 0n);
});

t.test('behavior: the customer approves early and is paid out at once', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const key = await fundStable(c, 1_000_000n);
  await completeJob(escrow.chain, { jobKey: key, payout: 600_000n, fee: 60_000n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  t.equal(await reverts(c, 2, 'approve', key), 'NotCustomer', 'only the customer approves');
  const before = await balance(c, PROVIDER);
  await c.publicClient.waitForTransactionReceipt({ hash: await c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'approve', args: [key] }) });
  t.equal(await balance(c, PROVIDER) - before, 540_000n);
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'released');
  t.equal(await reverts(c, 0, 'release', key), 'WrongStatus', 'no release after an approve');
});

t.test('behavior: a dispute blocks release until the operator resolves it', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const key = await fundStable(c, 1_000_000n);
  await completeJob(escrow.chain, { jobKey: key, payout: 800_000n, fee: 80_000n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  t.equal(await reverts(c, 2, 'dispute', key), 'NotCustomer', 'only the customer disputes');
  await c.publicClient.waitForTransactionReceipt({ hash: await c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [key] }) });
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'disputed');
  await c.testClient.increaseTime({ seconds: 601 });
  await c.testClient.mine({ blocks: 1 });
  t.equal(await reverts(c, 0, 'release', key), 'WrongStatus', 'release is blocked after the window while disputed');
  const customerBefore = await balance(c, CUSTOMER);
  const providerBefore = await balance(c, PROVIDER);
  await resolveDispute(escrow.chain, { jobKey: key, payout: 400_000n, fee: 40_000n });
  t.equal(await balance(c, PROVIDER) - providerBefore, 360_000n);
  t.equal(await balance(c, CUSTOMER) - customerBefore, 600_000n);
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'released');
});

t.test('behavior: a refund only after the operator authorizes it, and only to the customer', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const key = await fundStable(c, 2_000_000n);
  t.equal(await reverts(c, 1, 'claimRefund', key), 'WrongStatus', 'no claim before authorization');
  t.equal(await reverts(c, 1, 'authorizeRefund', key), 'NotOperator', 'the customer cannot authorize their own refund');
  await authorizeRefund(escrow.chain, key);
  t.equal(await reverts(c, 2, 'claimRefund', key), 'NotCustomer', 'another wallet cannot claim it');
  const before = await balance(c, CUSTOMER);
  await c.publicClient.waitForTransactionReceipt({ hash: await c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'claimRefund', args: [key] }) });
  t.equal(await balance(c, CUSTOMER) - before, 2_000_000n, 'the whole deposit comes back');
  t.equal(await reverts(c, 1, 'claimRefund', key), 'WrongStatus', 'claimed once');
});

t.test('error: nobody but the operator completes; a funded key cannot be funded twice', async (t) => {
  const c = await chainP;
  const key = await fundEth(c, 1000n);
  for (const index of [1, 2] as const) {
    await t.rejects(
      c.publicClient.simulateContract({ account: c.wallet(index).account, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'completeJob', args: [key, 1n, 0n, 1n, RESULT, PROVIDER] }),
      /NotOperator/,
      `account ${index} cannot complete`,
    );
  }
  const jobId = jobIdBytes();
  await c.publicClient.waitForTransactionReceipt({ hash: await c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobId, zeroAddress, 5n, HASH], value: 5n }) });
  await t.rejects(
    c.publicClient.simulateContract({ account: c.wallet(1).account, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobId, zeroAddress, 5n, HASH], value: 5n }),
    /AlreadyFunded/,
  );
  await t.rejects(
    c.publicClient.simulateContract({ account: c.wallet(1).account, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobIdBytes(), zeroAddress, 5n, HASH], value: 4n }),
    /BadAmount/,
    'ETH must match the amount',
  );
});

t.test('behavior: the health probe tells a wrong chain id and a missing escrow apart', async (t) => {
  const c = await chainP;
  const { connectChain } = await import('../src/chain/client.js');
  const { startChainHealth } = await import('../src/chain/health.js');
  const probe = async (chainId: number, escrowAddress: `0x${string}`) => {
    const health = await startChainHealth(connectChain({ rpcUrl: c.anvil.rpcUrl, chainId, escrowAddress, operatorPrivateKey: null }), { intervalMs: 3_600_000 });
    health.close();
    return health.current();
  };
  t.same(await probe(4663, c.deployment.escrow), { ok: true });
  t.match(await probe(1, c.deployment.escrow), { ok: false, code: 'wrong_chain' });
  t.match(await probe(4663, PROVIDER), { ok: false, code: 'escrow_not_deployed' });
});
