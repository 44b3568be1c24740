import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { errorText } from '@gpufarm/shared';

const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/);
/** What `npm start` and `npm run deploy -- --out FILE` write (`Deployment` plus the RPC URL). */
const deploymentFileSchema = z.object({
  rpcUrl: z.url(),
  chainId: z.int().positive(),
  escrow: address,
  stablecoin: z.object({ address, symbol: z.string().min(1), decimals: z.int() }).nullable(),
  deployBlock: z.int().min(0),
});

/** A deployment where the control plane reaches it: what `deploymentEnv` turns into settings. */
export type ReachableDeployment = z.infer<typeof deploymentFileSchema>;

/**
 * The control plane's chain variables for a deployment (`GF_RPC_URL`, `GF_CHAIN_ID`,
 * `GF_ESCROW_ADDRESS`, `GF_ESCROW_START_BLOCK`, `GF_STABLE_TOKEN_*` when it has a stablecoin).
 * The operator key is not part of a deployment: callers that hold it add it.
 */
export function deploymentEnv(d: ReachableDeployment): Record<string, string> {
  return {
    GF_RPC_URL: d.rpcUrl,
    GF_CHAIN_ID: String(d.chainId),
    GF_ESCROW_ADDRESS: d.escrow,
    GF_ESCROW_START_BLOCK: String(d.deployBlock),
    ...(d.stablecoin ? { GF_STABLE_TOKEN_ADDRESS: d.stablecoin.address, GF_STABLE_TOKEN_SYMBOL: d.stablecoin.symbol, GF_STABLE_TOKEN_DECIMALS: String(d.stablecoin.decimals) } : {}),
  };
}

/**
 * The deployment file at `file` (`GF_CHAIN_FILE`: what `npm run deploy -- --out FILE` and
 * `npm start` write). Throws an Error saying what is wrong when it is missing or malformed;
 * `loadConfig` names the variable.
 */
export function readDeploymentFile(file: string): ReachableDeployment {
  try {
    return deploymentFileSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
  } catch (err) {
    throw new Error(`${file} is not a deployment file (npm run deploy -- --out FILE writes one): ${errorText(err)}`, { cause: err });
  }
}
