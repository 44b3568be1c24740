import { parseEventLogs, type Address, type Hash, type Hex } from 'viem';
import { gpuFarmEscrowAbi, testStablecoinAbi } from '@gpufarm/shared';
import type { Marketplace } from './marketplace.js';

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
