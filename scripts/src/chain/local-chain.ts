import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gpuFarmEscrowBytecode } from '@gpufarm/shared';
import { keccak256 } from 'viem';
import { ANVIL_ACCOUNTS, startAnvil, type Anvil } from '@gpufarm/control-plane/testing';
import { contractHasCode, deployContracts, type Deployment, deploymentEnv } from '@gpufarm/control-plane/chain';

/** Roles of anvil's dev accounts on the local chain. */
export const LOCAL_OPERATOR = ANVIL_ACCOUNTS[0];
export const LOCAL_CUSTOMER = ANVIL_ACCOUNTS[1];
export const LOCAL_TREASURY = ANVIL_ACCOUNTS[4];
/** tUSDC minted to the customer dev wallet: 1,000,000 (6 decimals). */
export const LOCAL_CUSTOMER_TUSDC = 1_000_000n * 1_000_000n;

/** `<dataDir>/chain.json`: the deployment the local control plane (and tools) read. */
export const chainFile = (dataDir: string) => join(dataDir, 'chain.json');

export interface LocalChain {
  anvil: Anvil;
  deployment: Deployment;
  /** True when this start deployed the contracts (false: reused from the saved chain state). */
  deployed: boolean;
}

/** The control plane's settings (environment variables) for a local chain. */
export function localChainEnv({ anvil, deployment }: LocalChain): Record<string, string> {
  return { ...deploymentEnv({ ...deployment, rpcUrl: anvil.rpcUrl }), GF_OPERATOR_PRIVATE_KEY: LOCAL_OPERATOR.privateKey };
}

/**
 * The local chain of `npm start`: anvil with `--chain-id`, its state kept in
 * `<dataDir>/anvil-state.json` across restarts, on port 8545 (any free port when taken). The
 * escrow and the test stablecoin are deployed once (operator: dev account 0, treasury: account 4,
 * tUSDC minted to the customer dev wallet, account 1) and recorded in `<dataDir>/chain.json`
 * with the hash of the escrow's code, deployed again when that code changed.
 */
export async function startLocalChain(options: { dataDir: string; chainId: number; challengeWindowSeconds: number }): Promise<LocalChain> {
  mkdirSync(options.dataDir, { recursive: true });
  const args = ['--state', join(options.dataDir, 'anvil-state.json')];
  let anvil: Anvil;
  try {
    anvil = await startAnvil({ chainId: options.chainId, port: 8545, args, detached: true });
  } catch {
    anvil = await startAnvil({ chainId: options.chainId, port: 0, args, detached: true });
  }
  try {
    const file = chainFile(options.dataDir);
    // The escrow's code changes with the repository: a chain saved by an older checkout gets
    // the current escrow deployed afresh instead of keeping one without today's rules.
    const escrowCodeHash = keccak256(gpuFarmEscrowBytecode);
    if (existsSync(file)) {
      const saved = JSON.parse(readFileSync(file, 'utf8')) as Deployment & { rpcUrl: string; escrowCodeHash?: string };
      if (saved.chainId === options.chainId && saved.escrowCodeHash === escrowCodeHash && (await contractHasCode(anvil.rpcUrl, options.chainId, saved.escrow))) {
        const deployment = { ...saved, rpcUrl: anvil.rpcUrl };
        writeFileSync(file, `${JSON.stringify(deployment, null, 2)}\n`);
        return { anvil, deployment, deployed: false };
      }
    }
    const deployment = await deployContracts({
      rpcUrl: anvil.rpcUrl,
      chainId: options.chainId,
      deployerKey: LOCAL_OPERATOR.privateKey,
      operator: LOCAL_OPERATOR.address,
      treasury: LOCAL_TREASURY.address,
      challengeWindowSeconds: options.challengeWindowSeconds,
      withStablecoin: true,
      mint: [{ to: LOCAL_CUSTOMER.address, amount: LOCAL_CUSTOMER_TUSDC }],
    });
    writeFileSync(file, `${JSON.stringify({ ...deployment, rpcUrl: anvil.rpcUrl, escrowCodeHash }, null, 2)}\n`);
    return { anvil, deployment, deployed: true };
  } catch (err) {
    await anvil.stop();
    throw err;
  }
}
