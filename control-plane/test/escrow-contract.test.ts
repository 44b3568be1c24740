import t from 'tap';
import { encodeFunctionData, keccak256, parseEventLogs, stringToHex, zeroAddress, type Address, type Hash, type Hex } from 'viem';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { gpuFarmEscrowAbi, testStablecoinAbi } from '@gpufarm/shared';
import { authorizeRefund, completeJob, readEscrowJob, releaseJob, resolveDispute } from '../src/chain/escrow.js';
import { escrowJobKey } from '../src/jobs/escrow-key.js';
import { BLOCK, deployBlocklistToken, deployTestWallet, escrowDepsFor, ON_RECEIVE, startTestChain, TREASURY, walletExecute, type TestChain } from './helpers/chain.js';
import { blocklistTokenAbi, testWalletAbi } from './helpers/test-contracts.generated.js';

// One anvil for the file; each test uses fresh job ids.
const chainP = startTestChain(t, { challengeWindowSeconds: 600 });
const PROVIDER = '0x00000000000000000000000000000000000fa12e' as const;
const CUSTOMER = ANVIL_ACCOUNTS[1].address;
let n = 0;
const jobIdBytes = () => keccak256(stringToHex(`job_contract_test_${n++}`));
const HASH = keccak256(stringToHex('terms'));
const RESULT = `0x${'ab'.repeat(32)}` as Hex;

const keyOf = (customer: Address, jobId: Hex) => keccak256(`0x${customer.slice(2).toLowerCase().padStart(64, '0')}${jobId.slice(2)}`);

async function fundEth(c: TestChain, amount: bigint) {
  const jobId = jobIdBytes();
  const hash = await c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobId, zeroAddress, amount, HASH], value: amount });
  await c.publicClient.waitForTransactionReceipt({ hash });
  return keyOf(CUSTOMER, jobId);
}

async function fundStable(c: TestChain, amount: bigint) {
  const token = c.deployment.stablecoin!.address;
  const jobId = jobIdBytes();
  const w = c.wallet(1);
  await c.publicClient.waitForTransactionReceipt({ hash: await w.writeContract({ address: token, abi: testStablecoinAbi, functionName: 'approve', args: [c.deployment.escrow, amount] }) });
  await c.publicClient.waitForTransactionReceipt({ hash: await w.writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobId, token, amount, HASH] }) });
  return keyOf(CUSTOMER, jobId);
}

const balance = (c: TestChain, who: `0x${string}`) =>
  c.publicClient.readContract({ address: c.deployment.stablecoin!.address, abi: testStablecoinAbi, functionName: 'balanceOf', args: [who] });

/** Resolves to the error name a simulated call reverts with. */
async function revertName(call: Promise<unknown>): Promise<string> {
  try {
    await call;
    return 'did not revert';
  } catch (err) {
    return /reverted with the following reason:\s*\n?\s*(\w+)|Error: (\w+)\(/.exec((err as Error).message)?.slice(1).find(Boolean) ?? (err as Error).message.split('\n')[0]!;
  }
}

/** Sends a transaction expected to revert; resolves to the revert's error name. */
function reverts(c: TestChain, index: 0 | 1 | 2, functionName: 'release' | 'claimRefund' | 'approve' | 'dispute' | 'authorizeRefund', key: Hex): Promise<string> {
  return revertName(c.publicClient.simulateContract({ account: c.wallet(index).account, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName, args: [key] }));
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

// No party can hold up another's money: a payment that fails is credited to its recipient, who
// takes it later with withdraw(token).

const mined = async (c: TestChain, hash: Promise<Hash>) => c.publicClient.waitForTransactionReceipt({ hash: await hash });
const ethOf = (c: TestChain, who: Address) => c.publicClient.getBalance({ address: who });
const tokenOf = (c: TestChain, token: Address, who: Address) => c.publicClient.readContract({ address: token, abi: blocklistTokenAbi, functionName: 'balanceOf', args: [who] });
const withdrawable = (c: TestChain, who: Address, token: Address) =>
  c.publicClient.readContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'withdrawable', args: [who, token] });
const withdrawReverts = (c: TestChain, who: Address, token: Address) =>
  revertName(c.publicClient.simulateContract({ account: who, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'withdraw', args: [token] }));
const escrowCall = (call: Parameters<typeof encodeFunctionData<typeof gpuFarmEscrowAbi>>[0]) => encodeFunctionData(call);

async function deferredIn(c: TestChain, txHash: Hash) {
  const { logs } = await c.publicClient.getTransactionReceipt({ hash: txHash });
  return parseEventLogs({ abi: gpuFarmEscrowAbi, eventName: 'PaymentDeferred', logs }).map((e) => e.args);
}

async function afterWindow(c: TestChain) {
  await c.testClient.increaseTime({ seconds: 601 });
  await c.testClient.mine({ blocks: 1 });
}

/** A TestWallet of dev account 1 that funds a job of `amount` wei itself: the wallet is the job's customer. */
async function walletFundsEth(c: TestChain, onReceive: (typeof ON_RECEIVE)[keyof typeof ON_RECEIVE], amount: bigint) {
  const wallet = await deployTestWallet(c, 1, onReceive);
  const jobId = jobIdBytes();
  await walletExecute(c, 1, wallet, { to: c.deployment.escrow, value: amount, data: escrowCall({ abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobId, zeroAddress, amount, HASH] }) });
  return { wallet, key: keyOf(wallet, jobId) };
}

/** A BlocklistToken job of `amount` funded by dev account 2. */
async function fundBlocklisted(c: TestChain, amount: bigint) {
  const token = await deployBlocklistToken(c);
  const customer = c.wallet(2);
  await mined(c, customer.writeContract({ address: token, abi: blocklistTokenAbi, functionName: 'mint', args: [customer.account.address, amount] }));
  await mined(c, customer.writeContract({ address: token, abi: blocklistTokenAbi, functionName: 'approve', args: [c.deployment.escrow, amount] }));
  const jobId = jobIdBytes();
  await mined(c, customer.writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [jobId, token, amount, HASH] }));
  return { token, customer: customer.account.address, key: keyOf(customer.account.address, jobId) };
}

const block = (c: TestChain, token: Address, who: Address, how: (typeof BLOCK)[keyof typeof BLOCK]) =>
  mined(c, c.wallet(3).writeContract({ address: token, abi: blocklistTokenAbi, functionName: 'setBlocked', args: [who, how] }));

t.test('behavior: a customer contract that refuses ETH cannot hold up the release: provider and treasury are paid to the wei, its refund waits in the escrow', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const deposit = 10n ** 18n;
  const held = await ethOf(c, c.deployment.escrow);
  const { wallet, key } = await walletFundsEth(c, ON_RECEIVE.refuse, deposit);
  const payout = 6n * 10n ** 17n + 1n;
  const fee = 6n * 10n ** 16n;
  await completeJob(escrow.chain, { jobKey: key, payout, fee, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  await afterWindow(c);
  const before = { provider: await ethOf(c, PROVIDER), treasury: await ethOf(c, TREASURY) };
  const { txHash } = await releaseJob(escrow.chain, key);
  t.equal((await ethOf(c, PROVIDER)) - before.provider, payout - fee, 'provider: payout minus fee');
  t.equal((await ethOf(c, TREASURY)) - before.treasury, fee, 'treasury: the fee');
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'released');
  const refund = deposit - payout;
  t.same(await deferredIn(c, txHash), [{ jobKey: key, to: wallet, token: zeroAddress, amount: refund }], 'the refund is deferred, with an event');
  t.equal(await withdrawable(c, wallet, zeroAddress), refund, "credited to the customer's wallet");
  t.equal((await ethOf(c, c.deployment.escrow)) - held, refund, 'the escrow keeps exactly the credit');
  t.equal(await ethOf(c, wallet), 0n);

  t.equal(await withdrawReverts(c, wallet, zeroAddress), 'TransferFailed', 'a wallet still refusing ETH keeps its credit');
  await mined(c, c.wallet(1).writeContract({ address: wallet, abi: testWalletAbi, functionName: 'setOnReceive', args: [ON_RECEIVE.accept] }));
  await walletExecute(c, 1, wallet, { to: c.deployment.escrow, data: escrowCall({ abi: gpuFarmEscrowAbi, functionName: 'withdraw', args: [zeroAddress] }) });
  t.equal(await ethOf(c, wallet), refund, 'once it accepts ETH, withdraw pays it the refund');
  t.equal(await withdrawable(c, wallet, zeroAddress), 0n);
  t.equal(await ethOf(c, c.deployment.escrow), held, 'nothing of the job stays in the escrow');
  t.equal(await withdrawReverts(c, wallet, zeroAddress), 'NothingToWithdraw', 'withdrawn once');
});

t.test('behavior: a customer that burns all the gas it is sent gets its refund credited; the release spends a bounded amount of gas', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const { wallet, key } = await walletFundsEth(c, ON_RECEIVE.burnGas, 1_000_000n);
  await completeJob(escrow.chain, { jobKey: key, payout: 600_000n, fee: 60_000n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  await afterWindow(c);
  const before = await ethOf(c, PROVIDER);
  const { txHash } = await releaseJob(escrow.chain, key);
  t.equal((await ethOf(c, PROVIDER)) - before, 540_000n);
  t.equal(await withdrawable(c, wallet, zeroAddress), 400_000n);
  const { gasUsed } = await c.publicClient.getTransactionReceipt({ hash: txHash });
  t.ok(gasUsed < 300_000n, `the release used ${gasUsed} gas: the wallet got a bounded share, not all of it`);
});

// A fresh token per case, so balances are absolute. The provider is dev account 3, so it can withdraw.
for (const { who, how } of [
  { who: 'customer', how: 'revert' },
  { who: 'provider', how: 'returnFalse' },
] as const) {
  t.test(`behavior: a token that refuses the ${who} (${how}) cannot hold up the other payouts; the ${who} withdraws once unblocked`, async (t) => {
    const c = await chainP;
    const escrow = await escrowDepsFor(t, c);
    const provider = ANVIL_ACCOUNTS[3].address;
    const { token, customer, key } = await fundBlocklisted(c, 10_000_000n);
    await completeJob(escrow.chain, { jobKey: key, payout: 7_333_334n, fee: 666_667n, computeSeconds: 3600, resultHash: RESULT, provider });
    const blocked = who === 'customer' ? customer : provider;
    const due = who === 'customer' ? 2_666_666n : 6_666_667n;
    await block(c, token, blocked, BLOCK[how]);
    await afterWindow(c);
    const { txHash } = await releaseJob(escrow.chain, key);
    t.equal(await tokenOf(c, token, provider), who === 'provider' ? 0n : 6_666_667n, 'provider: payout minus fee, unless refused');
    t.equal(await tokenOf(c, token, TREASURY), 666_667n, 'treasury: the fee');
    t.equal(await tokenOf(c, token, customer), who === 'customer' ? 0n : 2_666_666n, 'customer: the rest of the deposit, unless refused');
    t.same(await deferredIn(c, txHash), [{ jobKey: key, to: blocked, token, amount: due }], 'the refused payout is deferred, with an event');
    t.equal(await withdrawable(c, blocked, token), due);
    t.equal(await tokenOf(c, token, c.deployment.escrow), due, 'the escrow keeps exactly the credit');

    t.equal(await withdrawReverts(c, blocked, token), 'TransferFailed', 'still refused: the credit stays');
    await block(c, token, blocked, BLOCK.none);
    await mined(c, c.wallet(who === 'customer' ? 2 : 3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'withdraw', args: [token] }));
    t.equal(await tokenOf(c, token, blocked), due, 'withdrawn');
    t.equal(await tokenOf(c, token, c.deployment.escrow), 0n);
    t.equal(await withdrawable(c, blocked, token), 0n);
  });
}

/** A job of 1,000,000 wei funded, completed and disputed by a TestWallet that refuses ETH. */
async function disputedByRefusingWallet(c: TestChain, escrow: Awaited<ReturnType<typeof escrowDepsFor>>) {
  const { wallet, key } = await walletFundsEth(c, ON_RECEIVE.refuse, 1_000_000n);
  await completeJob(escrow.chain, { jobKey: key, payout: 800_000n, fee: 80_000n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  await walletExecute(c, 1, wallet, { to: c.deployment.escrow, data: escrowCall({ abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [key] }) });
  return { wallet, key };
}

t.test('behavior: a disputing customer that refuses ETH cannot hold up the resolution: provider and treasury are paid', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const { wallet, key } = await disputedByRefusingWallet(c, escrow);
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'disputed');
  const before = { provider: await ethOf(c, PROVIDER), treasury: await ethOf(c, TREASURY) };
  const { txHash } = await resolveDispute(escrow.chain, { jobKey: key, payout: 400_000n, fee: 40_000n });
  t.equal((await ethOf(c, PROVIDER)) - before.provider, 360_000n);
  t.equal((await ethOf(c, TREASURY)) - before.treasury, 40_000n);
  t.same(await deferredIn(c, txHash), [{ jobKey: key, to: wallet, token: zeroAddress, amount: 600_000n }]);
  t.equal(await withdrawable(c, wallet, zeroAddress), 600_000n);
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'released');
});

t.test('error: OutOfGas: a release sent with too little gas for its payouts reverts instead of deferring them', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const key = await fundEth(c, 1_000_000n);
  await completeJob(escrow.chain, { jobKey: key, payout: 600_000n, fee: 60_000n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  await afterWindow(c);
  const release = (gas: bigint) => c.publicClient.simulateContract({ account: c.wallet(2).account, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'release', args: [key], gas });
  t.equal(await revertName(release(150_000n)), 'OutOfGas', 'a caller cannot starve a payout into a deferral');
  t.equal(await revertName(release(500_000n)), 'did not revert', 'with enough gas it pays out');
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'completed', 'nothing moved');
});

// A dispute has a deadline: DISPUTE_TIMEOUT after it was raised. Before it only the operator
// ends it (resolveDispute); from it on, anyone's claimDisputeTimeout returns the whole deposit to
// the customer and the operator can no longer resolve.

const DAYS_14 = 14n * 24n * 3600n;

async function disputedStable(c: TestChain, escrow: Awaited<ReturnType<typeof escrowDepsFor>>) {
  const key = await fundStable(c, 1_000_000n);
  await completeJob(escrow.chain, { jobKey: key, payout: 800_000n, fee: 80_000n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  const receipt = await mined(c, c.wallet(1).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [key] }));
  const [event] = parseEventLogs({ abi: gpuFarmEscrowAbi, eventName: 'JobDisputed', logs: receipt.logs });
  const block = await c.publicClient.getBlock({ blockNumber: receipt.blockNumber });
  return { key, disputeEndsAt: event!.args.disputeEndsAt, disputedAt: block.timestamp };
}

const timeoutReverts = (c: TestChain, index: 0 | 1 | 2, key: Hex) =>
  revertName(c.publicClient.simulateContract({ account: c.wallet(index).account, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'claimDisputeTimeout', args: [key] }));
const resolveReverts = (c: TestChain, key: Hex) =>
  revertName(c.publicClient.simulateContract({ account: c.wallet(0).account, address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'resolveDispute', args: [key, 0n, 0n] }));

t.test('behavior: a dispute ends 14 days after it was raised: before, only the operator resolves it; after, anyone returns the whole deposit to the customer', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  t.equal(await c.publicClient.readContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'DISPUTE_TIMEOUT' }), DAYS_14, 'the timeout is 14 days');
  const { key, disputeEndsAt, disputedAt } = await disputedStable(c, escrow);
  t.equal(disputeEndsAt, disputedAt + DAYS_14, 'JobDisputed names the deadline: 14 days after the dispute');
  t.equal((await readEscrowJob(escrow.chain, key)).disputeEndsAt, disputeEndsAt, 'the escrow keeps it with the job');
  t.equal(await timeoutReverts(c, 2, key), 'DisputeDeadlineNotReached', 'nobody ends it before the deadline');
  await c.testClient.setNextBlockTimestamp({ timestamp: disputeEndsAt - 1n });
  await c.testClient.mine({ blocks: 1 });
  t.equal(await timeoutReverts(c, 1, key), 'DisputeDeadlineNotReached', 'not even the customer, a second before');
  t.equal(await resolveReverts(c, key), 'did not revert', 'the operator still may, until the deadline');

  await c.testClient.setNextBlockTimestamp({ timestamp: disputeEndsAt });
  await c.testClient.mine({ blocks: 1 });
  t.equal(await resolveReverts(c, key), 'DisputeDeadlinePassed', 'from the deadline on, the operator can no longer resolve');
  const before = { customer: await balance(c, CUSTOMER), provider: await balance(c, PROVIDER), treasury: await balance(c, TREASURY) };
  // Anyone: here dev account 2, neither customer nor operator.
  const receipt = await mined(c, c.wallet(2).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'claimDisputeTimeout', args: [key] }));
  t.equal(receipt.status, 'success');
  t.equal(await balance(c, CUSTOMER) - before.customer, 1_000_000n, 'the customer gets the whole deposit back');
  t.equal(await balance(c, PROVIDER), before.provider, 'nothing to the provider');
  t.equal(await balance(c, TREASURY), before.treasury, 'no fee');
  const events = parseEventLogs({ abi: gpuFarmEscrowAbi, logs: receipt.logs });
  t.same(events.map((e) => e.eventName), ['DisputeTimedOut', 'JobReleased']);
  t.match(events[1]!.args, { jobKey: key, providerAmount: 0n, fee: 0n, customerRefund: 1_000_000n });
  const after = await readEscrowJob(escrow.chain, key);
  t.match(after, { status: 'released', payout: 0n, fee: 0n });
  t.equal(await timeoutReverts(c, 1, key), 'WrongStatus', 'ended once');
});

t.test('error: claimDisputeTimeout only ends a dispute', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const key = await fundStable(c, 1_000_000n);
  t.equal(await timeoutReverts(c, 1, key), 'WrongStatus', 'a funded job');
  await completeJob(escrow.chain, { jobKey: key, payout: 800_000n, fee: 80_000n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER });
  await c.testClient.increaseTime({ seconds: Number(DAYS_14) + 601 });
  await c.testClient.mine({ blocks: 1 });
  t.equal(await timeoutReverts(c, 1, key), 'WrongStatus', 'a completed job, however long after');
});

t.test('behavior: a customer that refuses ETH cannot hold up a timed-out dispute: its refund is credited for withdrawal', async (t) => {
  const c = await chainP;
  const escrow = await escrowDepsFor(t, c);
  const { wallet, key } = await disputedByRefusingWallet(c, escrow);
  await c.testClient.increaseTime({ seconds: Number(DAYS_14) });
  await c.testClient.mine({ blocks: 1 });
  const receipt = await mined(c, c.wallet(2).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'claimDisputeTimeout', args: [key] }));
  t.same(await deferredIn(c, receipt.transactionHash), [{ jobKey: key, to: wallet, token: zeroAddress, amount: 1_000_000n }]);
  t.equal(await withdrawable(c, wallet, zeroAddress), 1_000_000n);
  t.equal((await readEscrowJob(escrow.chain, key)).status, 'released');
});
