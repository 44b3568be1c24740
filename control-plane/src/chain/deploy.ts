import { createPublicClient, createWalletClient, http, type Address, type Hex } from 'viem';
import { privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import { gpuFarmEscrowAbi, gpuFarmEscrowBytecode, testStablecoinAbi, testStablecoinBytecode } from '@gpufarm/shared';
import { chainFor } from './client.js';

export interface Deployment {
  chainId: number;
  escrow: Address;
  /** The test stablecoin (6 decimals) on local chains; null when not deployed. */
  stablecoin: { address: Address; symbol: string; decimals: number } | null;
  operator: Address;
  treasury: Address;
  challengeWindowSeconds: number;
  /** The block the escrow was deployed in: event scans start there. */
  deployBlock: number;
}

/**
 * Deploys the escrow (and, for local chains, the test stablecoin) from `deployerKey` and waits
 * for both receipts. `mint` gives wallets test stablecoins right away.
 */
export async function deployContracts(params: {
  rpcUrl: string;
  chainId: number;
  deployerKey: Hex;
  operator: Address;
  treasury: Address;
  challengeWindowSeconds: number;
  withStablecoin: boolean;
  mint?: { to: Address; amount: bigint }[];
}): Promise<Deployment> {
  const chain = chainFor(params.chainId, params.rpcUrl);
  const transport = http(params.rpcUrl, { retryCount: 0, timeout: 10_000 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 100 });
  const wallet = createWalletClient({ chain, transport, account: privateKeyToAccount(params.deployerKey) });
  const escrowTx = await wallet.deployContract({
    abi: gpuFarmEscrowAbi,
    bytecode: gpuFarmEscrowBytecode,
    args: [params.operator, params.treasury, BigInt(params.challengeWindowSeconds)],
  });
  const escrowReceipt = await publicClient.waitForTransactionReceipt({ hash: escrowTx });
  if (!escrowReceipt.contractAddress || escrowReceipt.status !== 'success') throw new Error(`escrow deployment ${escrowTx} failed`);
  let stablecoin: Deployment['stablecoin'] = null;
  if (params.withStablecoin) {
    const coinTx = await wallet.deployContract({ abi: testStablecoinAbi, bytecode: testStablecoinBytecode });
    const coinReceipt = await publicClient.waitForTransactionReceipt({ hash: coinTx });
    if (!coinReceipt.contractAddress || coinReceipt.status !== 'success') throw new Error(`stablecoin deployment ${coinTx} failed`);
    stablecoin = { address: coinReceipt.contractAddress, symbol: 'tUSDC', decimals: 6 };
    for (const { to, amount } of params.mint ?? []) {
      const hash = await wallet.writeContract({ address: stablecoin.address, abi: testStablecoinAbi, functionName: 'mint', args: [to, amount] });
      await publicClient.waitForTransactionReceipt({ hash });
    }
  }
  return {
    chainId: params.chainId,
    escrow: escrowReceipt.contractAddress,
    stablecoin,
    operator: params.operator,
    treasury: params.treasury,
    challengeWindowSeconds: params.challengeWindowSeconds,
    deployBlock: Number(escrowReceipt.blockNumber),
  };
}

/** True when `address` holds contract code on the chain at `rpcUrl`. */
export async function contractHasCode(rpcUrl: string, chainId: number, address: Address): Promise<boolean> {
  const client = createPublicClient({ chain: chainFor(chainId, rpcUrl), transport: http(rpcUrl, { retryCount: 0, timeout: 5_000 }) });
  const code = await client.getCode({ address });
  return Boolean(code && code !== '0x');
}

/** The address of a private key (0x + 64 hex digits). */
export function addressOfKey(privateKey: Hex): Address {
  return privateKeyToAddress(privateKey);
}
