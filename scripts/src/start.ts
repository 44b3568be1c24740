import { randomBytes } from 'node:crypto';
import { ConfigError, loadConfig } from '@gpufarm/control-plane/config.js';
import { seedFleet } from '@gpufarm/control-plane/fleet/seed.js';
import { closeOnSignals, startControlPlane } from '@gpufarm/control-plane/server.js';

/** Machines seeded into an empty database so a newcomer sees capacity at once. */
const STARTER_FLEET_MACHINES = 60;

/**
 * `npm start`: the marketplace on this machine. The control plane on the embedded database
 * (or DATABASE_URL), with a small simulated fleet seeded into an empty database. The local
 * chain and a local agent join here as their issues land.
 */
async function main(): Promise<void> {
  // The admin token lets `npm run admin` reach this server; one is made per run unless set.
  process.env.GF_ADMIN_TOKEN ||= randomBytes(32).toString('base64url');
  const config = loadConfig();
  const controlPlane = await startControlPlane(config, { logger: process.env.GF_LOG_LEVEL !== undefined });
  const [{ machines }] = (await controlPlane.db.query<{ machines: number }>('SELECT count(*)::int AS machines FROM machines')) as [{ machines: number }];
  if (machines === 0) {
    const seeded = await seedFleet(controlPlane.db, { machines: STARTER_FLEET_MACHINES });
    await controlPlane.offerIndex.refresh();
    console.log(`seeded a simulated fleet: ${seeded.farms} farms, ${seeded.machines} machines, ${seeded.gpus} GPUs`);
  }
  const url = controlPlane.url;
  console.log(`
gpufarm is running (${config.environment}, chain ${config.chainId}, database: ${controlPlane.db.kind === 'pglite' ? `embedded in ${config.dataDir}/db` : 'PostgreSQL'})

  API        ${url}/v1
  capacity   curl -s '${url}/v1/capacity?limit=3'
  pricing    curl -s ${url}/v1/pricing

Create an API key (in another terminal; the key is printed once):
  npm run admin -- create-key --wallet 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 --scopes jobs:create,jobs:read,artifacts:read,billing:read

Stop with Ctrl-C.`);
  closeOnSignals(controlPlane);
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) console.error(`npm start: ${err.message}`);
  else console.error(`npm start failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
