import { randomBytes } from 'node:crypto';
import { ConfigError, loadConfig } from '@gpufarm/control-plane/config.js';
import { seedFleet } from '@gpufarm/control-plane/fleet/seed.js';
import { closeOnSignals, startControlPlane } from '@gpufarm/control-plane/server.js';
import { chainFile, LOCAL_CUSTOMER, localChainEnv, startLocalChain, type LocalChain } from './chain/local-chain.js';

/** Machines seeded into an empty database so a newcomer sees capacity at once. */
const STARTER_FLEET_MACHINES = 60;
/** The escrow's challenge window on the local chain: short, so a release is seen in minutes. */
const LOCAL_CHALLENGE_WINDOW_SECONDS = 300;

/**
 * `npm start`: the marketplace on this machine. The control plane on the embedded database
 * (or DATABASE_URL), with a small simulated fleet seeded into an empty database. Without
 * GF_RPC_URL, a local chain: anvil (chain id GF_CHAIN_ID) with the escrow and a test stablecoin
 * deployed, anvil's dev account 0 as the operator and account 1 as the funded customer wallet.
 */
async function main(): Promise<void> {
  // The admin token lets `npm run admin` reach this server; one is made per run unless set.
  process.env.GF_ADMIN_TOKEN ||= randomBytes(32).toString('base64url');
  let local: LocalChain | null = null;
  if (!process.env.GF_RPC_URL) {
    const preliminary = loadConfig();
    local = await startLocalChain({ dataDir: preliminary.dataDir, chainId: preliminary.chainId, challengeWindowSeconds: LOCAL_CHALLENGE_WINDOW_SECONDS });
    Object.assign(process.env, localChainEnv(local));
    process.env.GF_CHAIN_HEALTH_MS ||= '2000';
    process.env.GF_ESCROW_SWEEP_MS ||= '2000';
  }
  const stopChain = async () => {
    await local?.anvil.stop();
  };
  let controlPlane;
  try {
    const config = loadConfig();
    controlPlane = await startControlPlane(config, { logger: process.env.GF_LOG_LEVEL !== undefined });
    const [{ machines }] = (await controlPlane.db.query<{ machines: number }>('SELECT count(*)::int AS machines FROM machines')) as [{ machines: number }];
    if (machines === 0) {
      const seeded = await seedFleet(controlPlane.db, { machines: STARTER_FLEET_MACHINES });
      await controlPlane.offerIndex.refresh();
      console.log(`seeded a simulated fleet: ${seeded.farms} farms, ${seeded.machines} machines, ${seeded.gpus} GPUs`);
    }
    const url = controlPlane.url;
    const wallet = local ? LOCAL_CUSTOMER.address : '<your wallet address>';
    const chainLines = local
      ? `
Local chain (anvil, chain ${config.chainId}; state kept in ${config.dataDir}/anvil-state.json, addresses in ${chainFile(config.dataDir)}):
  RPC URL          ${local.anvil.rpcUrl}
  escrow           ${local.deployment.escrow}${local.deployed ? '' : ' (reused)'}
  stablecoin       ${local.deployment.stablecoin!.address} (${local.deployment.stablecoin!.symbol}, ${local.deployment.stablecoin!.decimals} decimals)
  customer wallet  ${LOCAL_CUSTOMER.address}  (anvil dev account 1: 10,000 ETH and 1,000,000 tUSDC)
  customer key     ${LOCAL_CUSTOMER.privateKey}  (a public test key: never use it on a real network)
`
      : `
Chain: ${config.chain?.rpcUrl ?? 'none'} (escrow ${config.chain?.escrowAddress ?? 'not configured'})
`;
    console.log(`
gpufarm is running (${config.environment}, chain ${config.chainId}, database: ${controlPlane.db.kind === 'pglite' ? `embedded in ${config.dataDir}/db` : 'PostgreSQL'})

  API        ${url}/v1
  capacity   curl -s '${url}/v1/capacity?limit=3'
  pricing    curl -s ${url}/v1/pricing
${chainLines}
Create an API key (in another terminal; the key is printed once):
  npm run admin -- create-key --wallet ${wallet} --scopes jobs:create,jobs:read,artifacts:read,billing:read

Stop with Ctrl-C.`);
  } catch (err) {
    await stopChain();
    throw err;
  }
  closeOnSignals(controlPlane, stopChain);
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) console.error(`npm start: ${err.message}`);
  else console.error(`npm start failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
