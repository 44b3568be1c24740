import type { Locator, Page } from 'playwright-core';
import { createTestClient, http, parseEventLogs, zeroAddress, type Address, type Hash, type Hex } from 'viem';
import { gpuFarmEscrowAbi, testStablecoinAbi } from '@gpufarm/shared';
import type { Job } from '@gpufarm/shared';
import type { Test } from 'tap';
import type { Customer } from './customer.js';
import type { Marketplace } from './marketplace.js';
import { until } from './wait.js';

/** The escrow's job states, in the contract's order. */
export const ESCROW_STATUS = ['None', 'Funded', 'Completed', 'Disputed', 'RefundAuthorized', 'Released', 'Refunded'] as const;

/** The escrow's record of a job, read from the chain. */
export async function escrowJob(market: Marketplace, jobKey: Hex) {
  const job = await market.publicClient.readContract({ address: market.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'getJob', args: [jobKey] });
  return { ...job, statusName: ESCROW_STATUS[Number(job.status)] };
}

/** `address`'s balance of `token` (the zero address: ETH) at `blockNumber`. */
export async function balanceAt(market: Marketplace, token: Address, address: Address, blockNumber: bigint): Promise<bigint> {
  if (/^0x0{40}$/i.test(token)) return market.publicClient.getBalance({ address, blockNumber });
  return market.publicClient.readContract({ address: token, abi: testStablecoinAbi, functionName: 'balanceOf', args: [address], blockNumber });
}

/** What a mined escrow transaction emitted, decoded. */
export async function escrowEvents(market: Marketplace, hash: Hash) {
  const receipt = await market.publicClient.getTransactionReceipt({ hash });
  const logs = parseEventLogs({ abi: gpuFarmEscrowAbi, logs: receipt.logs.filter((l) => l.address.toLowerCase() === market.deployment.escrow.toLowerCase()) });
  return { receipt, logs };
}

/**
 * Waits for the escrow worker's release of `job` after the challenge window and checks that
 * `payout` (the farm's payout address) got exactly the job's final payment less the fee.
 */
export async function expectPaidOnRelease(t: Test, market: Marketplace, customer: Customer, job: Job, payout: Address): Promise<void> {
  const released = await until(
    async () => {
      const j = await customer.getJob(job.id);
      return j.receipt?.status === 'released' && j.receipt.transactions.release ? j : undefined;
    },
    `the release of ${job.id}`,
    { timeoutMs: 60_000 },
  );
  const { receipt: mined } = await escrowEvents(market, released.receipt!.transactions.release as Hash);
  const onChain = await escrowJob(market, job.payment.escrowJobKey as Hex);
  t.equal(onChain.statusName, 'Released');
  const token = job.payment.token as Address;
  const paid = (await balanceAt(market, token, payout, mined.blockNumber)) - (await balanceAt(market, token, payout, mined.blockNumber - 1n));
  t.equal(paid, BigInt(job.cost!.finalPayment) - onChain.fee, 'the provider is paid the payout less the fee on release');
  t.ok(paid > 0n);
}

/**
 * Runs `during` while `wallet` refuses ETH (anvil gives it code that reverts), so an escrow payout
 * to it is deferred; the wallet is a plain account again afterwards (it can sign in and send).
 */
export async function whileRefusingEth<T>(market: Marketplace, wallet: Address, during: () => Promise<T>): Promise<T> {
  const anvil = createTestClient({ chain: market.chain, mode: 'anvil', transport: http(market.anvil.rpcUrl, { retryCount: 0 }) });
  await anvil.setCode({ address: wallet, bytecode: '0x60006000fd' });
  try {
    return await during();
  } finally {
    await anvil.setCode({ address: wallet, bytecode: '0x' });
  }
}

/** The ETH the escrow holds for `wallet` to withdraw. */
export function ethWithdrawable(market: Marketplace, wallet: Address): Promise<bigint> {
  return market.publicClient.readContract({ address: market.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'withdrawable', args: [wallet, zeroAddress] });
}

/**
 * Clicks Withdraw in `row` of a page's "Waiting for withdrawal" table and checks the outcome: the
 * page shows the mined transaction, sent by `wallet` itself; the escrow holds nothing more for it
 * in ETH and the wallet gained its credit less the gas; the page then says nothing waits.
 * Answers the transaction.
 */
export async function withdrawOnPage(t: Test, market: Marketplace, page: Page, row: Locator, wallet: Address): Promise<Hash> {
  const credit = await ethWithdrawable(market, wallet);
  const before = await market.publicClient.getBalance({ address: wallet });
  await row.getByRole('button', { name: 'Withdraw' }).click();
  const mined = page.getByRole('status').filter({ hasText: /Mined: Withdraw/ });
  await mined.waitFor({ timeout: 60_000 });
  const txHash = /0x[0-9a-f]{64}/.exec((await mined.textContent()) ?? '')?.[0] as Hash | undefined;
  if (!txHash) throw new Error('the page shows no transaction hash');
  const receipt = await market.publicClient.getTransactionReceipt({ hash: txHash });
  t.equal(receipt.from.toLowerCase(), wallet.toLowerCase(), "the wallet's own transaction");
  t.equal(await ethWithdrawable(market, wallet), 0n, 'nothing left in the escrow');
  t.equal((await market.publicClient.getBalance({ address: wallet })) - before, credit - receipt.gasUsed * receipt.effectiveGasPrice, 'the wallet has its credit');
  await page.getByText('Nothing waits for withdrawal.').waitFor({ timeout: 60_000 });
  return txHash;
}
