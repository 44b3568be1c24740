import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { ANVIL_ACCOUNTS, seedFleet } from '@gpufarm/control-plane/testing';
import { ConfigError, loadConfig, type Config } from '@gpufarm/control-plane/config';
import { migrate, openDatabase } from '@gpufarm/control-plane/db';
import { syncCatalog } from '@gpufarm/control-plane/fleet';
import { chainFile, LOCAL_CUSTOMER, localChainEnv, startLocalChain, type LocalChain } from './chain/local-chain.js';
import { LOCAL_FARM, localGpus, prepareAgentImages, startLocalAgent, type LocalAgent } from './local-agent.js';
import { startControlPlaneChild } from './control-plane-child.js';
import { Supervisor } from './supervisor.js';
import { buildDashboardOrExplain } from './web-build.js';
import { errorText } from '@gpufarm/shared';
import { scriptsEnv, ScriptsEnvError } from './env.js';

/** The escrow's challenge window on the local chain: short, so a release is seen in minutes. */
const LOCAL_CHALLENGE_WINDOW_SECONDS = 300;
/** The local farm's payout address: anvil dev account 2, so the release's split shows on its own. */
const LOCAL_PAYOUT = ANVIL_ACCOUNTS[2];
/** The local admin wallet (`GF_ADMIN_WALLETS` unless set): anvil dev account 3, a key no real network trusts. */
const LOCAL_ADMIN = ANVIL_ACCOUNTS[3];

const say = (line: string) => console.log(`[start] ${line}`);

/**
 * What `/v1/capacity` lists for the local farm once the agent's inventory is in and its
 * GPU challenge passed (waits up to 60 s: the agent sets up and runs it first).
 */
async function localOffer(url: string): Promise<string | null> {
  for (let i = 0; i < 240; i++) {
    const list = (await fetch(`${url}/v1/capacity?farm=${LOCAL_FARM.slug}`).then((r) => r.json()).catch(() => null)) as { data?: { count: number; gpu: { label: string }; simulated: boolean }[] } | null;
    const offer = list?.data?.[0];
    if (offer) return `${offer.count}x ${offer.gpu.label}${offer.simulated ? ' (simulated)' : ''} in /v1/capacity`;
    await new Promise((r) => setTimeout(r, 250));
  }
  return null;
}

/** A JSON log line below warning level (pino's 40). */
function isQuietLogLine(line: string): boolean {
  if (!line.startsWith('{')) return false;
  try {
    const level = (JSON.parse(line) as { level?: unknown }).level;
    return typeof level === 'number' && level < 40;
  } catch {
    return false;
  }
}

/** `GF_SEED_FLEET=<n>`: n simulated machines, seeded before the control plane starts, into an empty database only. */
async function seedIfAsked(config: Config, seed: number): Promise<void> {
  if (seed === 0) return;
  const db = await openDatabase(config);
  try {
    await migrate(db);
    await syncCatalog(db);
    const [{ machines }] = (await db.query<{ machines: number }>('SELECT count(*)::int AS machines FROM machines')) as [{ machines: number }];
    if (machines > 0) return;
    const seeded = await seedFleet(db, { machines: seed });
    say(`seeded a simulated fleet: ${seeded.farms} farms, ${seeded.machines} machines, ${seeded.gpus} GPUs`);
  } finally {
    await db.close();
  }
}

/**
 * `npm start`: the whole marketplace on this machine, each part a child process it watches
 * (`Supervisor`). The control plane on the embedded database (or DATABASE_URL); without
 * GF_RPC_URL, a local chain (anvil, chain id GF_CHAIN_ID) with the escrow and a test
 * stablecoin, anvil's dev account 0 as the operator, account 1 the funded customer wallet; the
 * local registry with the images; and one local agent enrolled in the farm `local` (simulated
 * GPUs when the machine has none), paid to dev account 2. The control plane and the agent are
 * restarted when they die; without the chain everything stops.
 */
async function main(): Promise<number> {
  // The admin token lets `npm run admin` and the local agent's enrollment reach this server.
  const given = scriptsEnv();
  process.env.GF_ADMIN_TOKEN = given.GF_ADMIN_TOKEN ?? randomBytes(32).toString('base64url');
  const preliminary = loadConfig();
  const supervisor = new Supervisor(say);
  // Every signal is handled, not only the first: a signal to the whole process group (timeout,
  // CI runners, job control) reaches this process more than once (npm forwards it too), and an
  // unhandled second one would end it mid-stop with its children still running.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => void supervisor.stopAll(`${signal}: stopping the agent, the control plane and the chain`, 0));
  }
  let agent: LocalAgent | null = null;
  let local: LocalChain | null = null;
  let agentProblem: string | null;
  let offered: string | null = null;
  try {
    const docker = await prepareAgentImages(say);
    agentProblem = docker.problem;
    if (docker.images && !given.GF_CANARY_IMAGE) process.env.GF_CANARY_IMAGE = docker.images.images.canary.reference;
    // The built-in shell templates run the local busybox image.
    if (docker.images && !given.GF_SHELL_IMAGE) process.env.GF_SHELL_IMAGE = docker.images.images.busybox.reference;

    if (!given.GF_RPC_URL) {
      local = await startLocalChain({ dataDir: preliminary.dataDir, chainId: preliminary.chainId, challengeWindowSeconds: LOCAL_CHALLENGE_WINDOW_SECONDS });
      supervisor.watch('the local chain (anvil)', local.anvil);
      Object.assign(process.env, localChainEnv(local));
      process.env.GF_CHAIN_HEALTH_MS = given.GF_CHAIN_HEALTH_MS ?? '2000';
      process.env.GF_ESCROW_SWEEP_MS = given.GF_ESCROW_SWEEP_MS ?? '2000';
      process.env.GF_ADMIN_WALLETS = given.GF_ADMIN_WALLETS ?? LOCAL_ADMIN.address;
    }
    const config = loadConfig();
    await seedIfAsked(config, given.GF_SEED_FLEET);
    // Before the control plane, which serves web/dist at /dashboard/.
    const dashboardProblem = await buildDashboardOrExplain(say);

    // The control plane logs every request, so its last lines say something when it dies; only
    // its warnings and errors are printed, unless GF_LOG_LEVEL asks for a level.
    const printAll = given.GF_LOG_LEVEL !== undefined;
    const controlPlaneEnv: NodeJS.ProcessEnv = { ...process.env, GF_LOG_LEVEL: given.GF_LOG_LEVEL ?? 'info' };
    const printed = (line: string) => printAll || !isQuietLogLine(line);
    const startCp = () => startControlPlaneChild({ env: controlPlaneEnv, log: (line) => printed(line) && console.log(`[control-plane] ${line}`) });
    const cp = await startCp();
    // A restart listens where the agent and the banner expect it.
    controlPlaneEnv.PORT = new URL(cp.url).port;
    supervisor.watch('the control plane', cp, { restart: startCp });

    if (docker.images) {
      const gpus = localGpus();
      if (process.getuid?.() !== 0) say('note: the agent loop-mounts each job\'s /output, which needs root; run npm start as root (sudo -E npm start) for jobs to run');
      say(`starting the local agent (farm ${LOCAL_FARM.slug}, ${gpus ? `simulated GPUs ${gpus}` : 'the GPUs nvidia-smi reports'}, state in ${join(config.dataDir, 'agent')})`);
      const startAgent = () =>
        startLocalAgent({
          server: cp.url,
          adminToken: config.adminToken!,
          stateDir: resolve(config.dataDir, 'agent'),
          payout: LOCAL_PAYOUT.address,
          simulateGpus: gpus,
          egressProxyImage: docker.images!.images['egress-proxy']?.reference ?? null,
          log: (line) => console.log(`[agent] ${line}`),
        });
      try {
        agent = await startAgent();
        supervisor.watch('the local agent', agent, { restart: startAgent });
        offered = await localOffer(cp.url);
      } catch (err) {
        agentProblem = `the local agent did not start: ${errorText(err)}`;
      }
    }

    const url = cp.url;
    const chainLines = local
      ? `
Local chain (anvil, chain ${config.chainId}, pid ${local.anvil.pid}; state kept in ${config.dataDir}/anvil-state.json, addresses in ${chainFile(config.dataDir)}):
  RPC URL          ${local.anvil.rpcUrl}
  escrow           ${local.deployment.escrow}${local.deployed ? '' : ' (reused)'}  (challenge window ${local.deployment.challengeWindowSeconds} s)
  stablecoin       ${local.deployment.stablecoin!.address} (${local.deployment.stablecoin!.symbol}, ${local.deployment.stablecoin!.decimals} decimals)
  customer wallet  ${LOCAL_CUSTOMER.address}  (anvil dev account 1: 10,000 ETH and 1,000,000 tUSDC)
  customer key     ${LOCAL_CUSTOMER.privateKey}  (a public test key: never use it on a real network)
  operator key     ${LOCAL_PAYOUT.privateKey}  (anvil dev account 2, the local farm's payout wallet: /operator/)
  admin key        ${LOCAL_ADMIN.privateKey}  (anvil dev account 3, in GF_ADMIN_WALLETS: /admin/)
`
      : `
Chain: ${config.chain?.rpcUrl ?? 'none'} (escrow ${config.chain?.escrowAddress ?? 'not configured'})
`;
    const agentLines = agent
      ? `
Local agent: machine ${agent.machineId}${agent.enrolled ? ' (enrolled now)' : ''}, farm ${LOCAL_FARM.slug} (${LOCAL_FARM.region}, ${LOCAL_FARM.priceUsd} USD per GPU-hour), pid ${agent.pid}
  offers           ${offered ?? 'nothing yet (see the [agent] lines: an unhealthy machine offers no GPU, and a machine is offered once its GPU challenge passed)'}
  payout wallet    ${LOCAL_PAYOUT.address}  (anvil dev account 2)
  canary image     ${config.execution.canaryImage ? `${config.execution.canaryImage.repository}@${config.execution.canaryImage.digest}` : 'none'}
`
      : `
No local agent: ${agentProblem}
`;
    const dashboardLine =
      dashboardProblem ??
      `(open it in a browser, sign in with your wallet, create API keys there)${local ? `\n             local wallet: the customer key below in a browser wallet, on chain ${config.chainId} at the RPC URL below` : ''}`;
    console.log(`
gpufarm is running (${config.environment}, chain ${config.chainId}, database: ${config.databaseUrl ? 'PostgreSQL' : `embedded in ${config.dataDir}/db`})

  dashboard  ${url}/dashboard/   ${dashboardLine}
  operator   ${url}/operator/    farm operators: machines, earnings, enrollment tokens, prices (the farm's payout wallet)
  admin      ${url}/admin/       fleet health, machines, events, actions (${config.adminWallets.length > 0 ? `admin wallets: ${config.adminWallets.join(', ')}` : 'no admin wallet: set GF_ADMIN_WALLETS'})
  API        ${url}/v1   (control plane pid ${cp.pid})
  capacity   curl -s '${url}/v1/capacity?limit=3'
  pricing    curl -s ${url}/v1/pricing
${chainLines}${agentLines}
Run a canary job as a customer would (in another terminal):
  npm run demo

Create an API key of your own in the dashboard (API keys), or as an operator (printed once):
  npm run admin -- create-key --wallet ${local ? LOCAL_CUSTOMER.address : '<your wallet address>'} --scopes jobs:create,jobs:read,artifacts:read,billing:read

The control plane and the agent are restarted if they die; if the chain dies, everything stops.
Stop with Ctrl-C.`);
  } catch (err) {
    await supervisor.stopAll(`npm start failed: ${errorText(err)}`, 1);
  }
  return supervisor.done;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError || err instanceof ScriptsEnvError) console.error(`npm start: ${err.message}`);
    else console.error(`npm start failed: ${errorText(err)}`);
    process.exit(1);
  },
);
