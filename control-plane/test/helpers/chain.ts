import { createPublicClient, createTestClient, createWalletClient, getAddress, http, type Abi, type Account, type Address, type Chain, type Hash, type PublicClient, type TestClient, type Transport, type WalletClient, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { FundingCall } from '@gpufarm/shared';
import { ANVIL_ACCOUNTS, startAnvil, type Anvil } from '../../src/testing/anvil.js';
import { chainFor, connectChain } from '../../src/chain/client.js';
import { deployContracts, type Deployment } from '../../src/chain/deploy.js';
import { startChainHealth } from '../../src/chain/health.js';
import type { EscrowDeps } from '../../src/jobs/funding.js';
import { buildApp } from '../../src/app.js';
import { createOfferIndex } from '../../src/capacity/offer-index.js';
import { loadConfig } from '../../src/config.js';
import type { Database } from '../../src/db/database.js';
import { createMemoryRateLimitStore } from '../../src/http/rate-limit-store.js';
import { ADMIN_TOKEN, testArtifacts, type TestApp } from './app.js';
import { createPostgresTestDatabase } from './database.js';
import { blocklistTokenAbi, blocklistTokenBytecode, testWalletAbi, testWalletBytecode, testWalletFactoryAbi, testWalletFactoryBytecode } from './test-contracts.generated.js';

export const CHAIN_ID = 4663;
export const OPERATOR = ANVIL_ACCOUNTS[0];
export const TREASURY = ANVIL_ACCOUNTS[4].address;
/** Stablecoins minted to every customer wallet: 1,000,000 tUSDC. */
export const MINTED = 1_000_000_000_000n;

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface TestChain {
  anvil: Anvil;
  deployment: Deployment;
  chain: Chain;
  publicClient: PublicClient<Transport, Chain>;
  testClient: TestClient<'anvil', Transport, Chain>;
  /** A wallet for one of anvil's dev accounts (1-3 are customers; 0 is the operator). */
  wallet(index: 1 | 2 | 3 | 0): WalletClient<Transport, Chain, Account>;
}

/**
 * A real anvil (chain id 4663, a free port) for this test file, stopped at teardown, with the
 * escrow and the test stablecoin deployed and tUSDC minted to dev accounts 1-3.
 */
export async function startTestChain(t: Teardown, options: { challengeWindowSeconds?: number } = {}): Promise<TestChain> {
  const anvil = await startAnvil({ chainId: CHAIN_ID });
  t.teardown(() => anvil.stop());
  const deployment = await deployContracts({
    rpcUrl: anvil.rpcUrl,
    chainId: CHAIN_ID,
    deployerKey: OPERATOR.privateKey,
    operator: OPERATOR.address,
    treasury: TREASURY,
    challengeWindowSeconds: options.challengeWindowSeconds ?? 3600,
    withStablecoin: true,
    mint: [1, 2, 3].map((i) => ({ to: ANVIL_ACCOUNTS[i]!.address, amount: MINTED })),
  });
  const chain = chainFor(CHAIN_ID, anvil.rpcUrl);
  const transport = http(anvil.rpcUrl, { retryCount: 0 });
  return {
    anvil,
    deployment,
    chain,
    publicClient: createPublicClient({ chain, transport, pollingInterval: 50 }),
    testClient: createTestClient({ chain, transport, mode: 'anvil' }),
    wallet: (index) => createWalletClient({ chain, transport, account: privateKeyToAccount(ANVIL_ACCOUNTS[index].privateKey) }),
  };
}

/** The control plane's escrow deps on the test chain; the health probe is refreshed by hand (`health.refresh()`). */
export async function escrowDepsFor(t: Teardown, testChain: TestChain, options: { confirmations?: number; operator?: boolean } = {}): Promise<EscrowDeps> {
  const chain = connectChain({
    rpcUrl: testChain.anvil.rpcUrl,
    chainId: CHAIN_ID,
    escrowAddress: testChain.deployment.escrow,
    operatorPrivateKey: options.operator === false ? null : OPERATOR.privateKey,
    confirmations: options.confirmations ?? 1,
    timeoutMs: 1_000,
  });
  const health = await startChainHealth(chain, { intervalMs: 3_600_000 });
  t.teardown(() => health.close());
  return { chain, health };
}

/** The real app with funding on the test chain (the stablecoin configured), on a fresh PostgreSQL database. */
export async function buildEscrowTestApp(
  t: Teardown,
  testChain: TestChain,
  options: { env?: Record<string, string>; db?: Database; confirmations?: number } = {},
): Promise<TestApp & { escrow: EscrowDeps }> {
  const db = options.db ?? (await createPostgresTestDatabase(t)).db;
  const config = loadConfig({
    GF_ADMIN_TOKEN: ADMIN_TOKEN,
    GF_RPC_URL: testChain.anvil.rpcUrl,
    GF_ESCROW_ADDRESS: testChain.deployment.escrow,
    GF_OPERATOR_PRIVATE_KEY: OPERATOR.privateKey,
    GF_STABLE_TOKEN_ADDRESS: testChain.deployment.stablecoin!.address,
    GF_STABLE_TOKEN_SYMBOL: 'tUSDC',
    ...options.env,
  });
  const escrow = await escrowDepsFor(t, testChain, { confirmations: options.confirmations ?? 1 });
  const rateLimitStore = createMemoryRateLimitStore();
  const offerIndex = createOfferIndex(db, { refreshMs: 60_000, allowSimulated: config.execution.allowSimulatedMachines });
  await offerIndex.start();
  const artifacts = await testArtifacts(t, db, config);
  const app = await buildApp({ config, db, rateLimitStore, clientHashSalt: 'test-salt', offerIndex, escrow, logger: false, artifacts });
  t.teardown(async () => {
    await app.close();
    await offerIndex.close();
    await rateLimitStore.close();
  });
  return { app, db, config, offerIndex, rateLimitStore, escrow, ...artifacts };
}

/** Sends the funding calls from `wallet` exactly as returned, in order; returns each hash after it is mined. */
export async function sendFundingCalls(testChain: TestChain, wallet: WalletClient<Transport, Chain, Account>, calls: readonly FundingCall[]): Promise<Hash[]> {
  const hashes: Hash[] = [];
  for (const call of calls) {
    const hash = await wallet.sendTransaction({ to: call.to as Address, data: call.data as `0x${string}`, value: BigInt(call.value) });
    await testChain.publicClient.waitForTransactionReceipt({ hash });
    hashes.push(hash);
  }
  return hashes;
}

/** What a TestWallet does when it is sent ETH (its `OnReceive` enum). */
export const ON_RECEIVE = { accept: 0, refuse: 1, burnGas: 2 } as const;
/** How a BlocklistToken treats a transfer to a blocked address (its `Block` enum). */
export const BLOCK = { none: 0, revert: 1, returnFalse: 2 } as const;

async function deployFrom(testChain: TestChain, index: 1 | 2 | 3, abi: Abi, bytecode: Hex, args: readonly unknown[]): Promise<Address> {
  const hash = await testChain.wallet(index).deployContract({ abi, bytecode, args });
  const receipt = await testChain.publicClient.waitForTransactionReceipt({ hash });
  if (!receipt.contractAddress || receipt.status !== 'success') throw new Error(`deployment ${hash} failed`);
  return getAddress(receipt.contractAddress);
}

/** A smart-contract wallet (contracts/test/TestWallet.sol) owned by dev account `owner`. */
export function deployTestWallet(testChain: TestChain, owner: 1 | 2 | 3, onReceive: (typeof ON_RECEIVE)[keyof typeof ON_RECEIVE]): Promise<Address> {
  return deployFrom(testChain, owner, testWalletAbi, testWalletBytecode, [onReceive]);
}

/** A factory of wallets not deployed yet (contracts/test/TestWalletFactory.sol), for ERC-6492 signatures. */
export function deployTestWalletFactory(testChain: TestChain): Promise<Address> {
  return deployFrom(testChain, 3, testWalletFactoryAbi, testWalletFactoryBytecode, []);
}

/** A token with a blocklist (contracts/test/BlocklistToken.sol); anyone may mint or block. */
export function deployBlocklistToken(testChain: TestChain): Promise<Address> {
  return deployFrom(testChain, 3, blocklistTokenAbi, blocklistTokenBytecode, []);
}

/** Has `wallet` (a TestWallet owned by dev account `owner`) call `to` with `data`, sending `value` wei along; waits for the receipt. */
export async function walletExecute(testChain: TestChain, owner: 1 | 2 | 3, wallet: Address, call: { to: Address; data: Hex; value?: bigint }) {
  const value = call.value ?? 0n;
  const hash = await testChain.wallet(owner).writeContract({ address: wallet, abi: testWalletAbi, functionName: 'execute', args: [call.to, value, call.data], value });
  return testChain.publicClient.waitForTransactionReceipt({ hash });
}
