import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { createPublicClient, createWalletClient, http, type Hash, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ANVIL_ACCOUNTS } from '@gpufarm/control-plane/testing';
import { chainFor } from '@gpufarm/control-plane/chain';
import { loadConfig } from '@gpufarm/control-plane/config';
import { LABEL_OWNER } from '@gpufarm/agent/docker';
import { LOCAL_CUSTOMER, localChainEnv, startLocalChain, type LocalChain } from '../chain/local-chain.js';
import { readLocalImages, startLocalAgent, type LocalAgent, type LocalImages } from '../local-agent.js';
import { createBenchDatabase } from './database.js';
import { startControlPlaneProcess, type BenchServer } from './server.js';
import { errorText } from '@gpufarm/shared';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function json<T>(res: Response, what: string): Promise<T> {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

interface FundingCall {
  title: string;
  to: Hex;
  data: Hex;
  value: string;
}

/** A marketplace of the bench's own, as `npm start` runs one, with a customer of dev account 1. */
export interface BenchMarketplace {
  server: BenchServer;
  chain: LocalChain;
  agent: LocalAgent;
  images: LocalImages;
  databaseName: string;
  /** The database's URL, for a bench that seeds it further (more machines on the market). */
  databaseUrl: string;
  /** An API key of the customer (LOCAL_CUSTOMER's wallet) with jobs:create, jobs:read, artifacts:read. */
  apiKey: string;
  /** Calls answered 429 so far (each was retried after Retry-After). */
  rateLimited(): number;
  /** The agent's last 30 lines of output, for an error message. */
  agentOutput(): string[];
  /** A customer call with the API key; a 429 is waited out and retried. */
  api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** Creates a job running `sh -c script` on one GPU, of busybox unless `image` names another; answers its id (not funded yet). */
  createJob(title: string, script: string, image?: string): Promise<string>;
  /** Funds the job from the customer's wallet (viem) and fund-confirms it. */
  fund(jobId: string): Promise<void>;
  /** Stops the agent, the control plane and anvil, drops the database, removes the agent's containers and mounts. */
  close(log: (line: string) => void): Promise<void>;
}

/**
 * Starts a marketplace for an end-to-end bench: a fresh database, anvil with the escrow
 * (`startLocalChain`), the control plane as a process (serving web/dist at /dashboard/), and the
 * real agent (`gf-agent enroll` and `run`, one simulated GPU). The customer's API key comes from
 * the admin API.
 */
export async function startBenchMarketplace(log: (line: string) => void, name: string): Promise<BenchMarketplace> {
  const images = readLocalImages();
  if (!images) throw new Error('.gpufarm/images.json is missing: run bash scripts/build-images.sh');
  const root = mkdtempSync(join(tmpdir(), `gf-bench-${name}-`));
  const docker = new Docker();
  const cleanups: Array<() => Promise<unknown>> = [];
  let machineId: string | null = null;
  let agentLines: string[] = [];
  let rateLimited = 0;
  const close = async (say: (line: string) => void) => {
    while (cleanups.length > 0) await cleanups.pop()!().catch((err: unknown) => say(`${name} cleanup: ${errorText(err)}`));
    // The agent leaves its containers when stopped; remove them and release its /output loop mounts.
    if (machineId) {
      for (const c of await docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER}=${machineId}`] } })) await docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined);
    }
    const mounts = readFileSync('/proc/mounts', 'utf8').split('\n').map((l) => l.split(' ')[1] ?? '').filter((p) => p.startsWith(root));
    for (const point of mounts.sort((x, y) => y.length - x.length)) await run('umount', ['-l', point]).catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  };
  try {
    const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';
    const database = await createBenchDatabase(serverUrl);
    cleanups.push(() => database.drop());
    const chainId = loadConfig().chainId;
    const chain = await startLocalChain({ dataDir: join(root, 'chain'), chainId, challengeWindowSeconds: 3600 });
    cleanups.push(() => chain.anvil.stop());
    const adminToken = randomBytes(32).toString('base64url');
    const server = await startControlPlaneProcess({
      databaseUrl: database.url,
      readyPath: '/v1',
      env: { ...localChainEnv(chain), GF_CANARY_IMAGE: images.images.canary.reference, GF_ADMIN_TOKEN: adminToken, GF_ARTIFACT_DIR: join(root, 'artifacts'), GF_MATCH_INTERVAL_MS: '200', GF_ESCROW_SWEEP_MS: '500', GF_CHAIN_HEALTH_MS: '500' },
    });
    cleanups.push(() => server.stop());
    const agent = await startLocalAgent({
      server: server.url,
      adminToken,
      stateDir: join(root, 'agent'),
      payout: ANVIL_ACCOUNTS[2].address,
      simulateGpus: '1x rtx-4090-24gb',
      egressProxyImage: null,
      log: (line) => (agentLines = [...agentLines.slice(-30), line]),
    });
    machineId = agent.machineId;
    cleanups.push(() => agent.stop());
    log(`marketplace: control plane pid ${server.pid} (database ${database.name}), anvil at ${chain.anvil.rpcUrl}, agent pid ${agent.pid} (machine ${agent.machineId}, 1 simulated GPU)`);

    const { key: apiKey } = await json<{ key: string }>(
      await fetch(`${server.url}/admin/v1/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ walletAddress: LOCAL_CUSTOMER.address, scopes: ['jobs:create', 'jobs:read', 'artifacts:read'], label: 'bench' }),
      }),
      'POST /admin/v1/api-keys',
    );
    const api = async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> => {
      for (;;) {
        const res = await fetch(`${server.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        if (res.status === 429) {
          rateLimited += 1;
          await sleep(Number(res.headers.get('retry-after') ?? 1) * 1000);
          continue;
        }
        const text = await res.text();
        return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
      }
    };
    const viemChain = chainFor(chainId, chain.anvil.rpcUrl);
    const publicClient = createPublicClient({ chain: viemChain, transport: http(chain.anvil.rpcUrl), pollingInterval: 100 });
    const wallet = createWalletClient({ chain: viemChain, transport: http(chain.anvil.rpcUrl), account: privateKeyToAccount(LOCAL_CUSTOMER.privateKey) });
    const fundingCalls = new Map<string, FundingCall[]>();

    return {
      server,
      chain,
      agent,
      images,
      databaseName: database.name,
      databaseUrl: database.url,
      apiKey,
      rateLimited: () => rateLimited,
      agentOutput: () => agentLines,
      api,
      async createJob(title, script, image = images.images.busybox.reference) {
        const created = await api<{ job: { id: string }; funding: { calls: FundingCall[] } | null }>('POST', '/v1/jobs', {
          title,
          image,
          command: ['sh', '-c', script],
          workloadType: 'batch',
          gpu: { count: 1 },
          maxRuntimeSeconds: 600,
          maxPricePerGpuHour: '2.00',
          paymentToken: 'stable',
        });
        if (created.status !== 201 || !created.body.funding) throw new Error(`POST /v1/jobs answered ${created.status}: ${JSON.stringify(created.body).slice(0, 300)}`);
        fundingCalls.set(created.body.job.id, created.body.funding.calls);
        return created.body.job.id;
      },
      async fund(jobId) {
        let fundTx: Hash | null = null;
        for (const call of fundingCalls.get(jobId) ?? []) {
          fundTx = await wallet.sendTransaction({ to: call.to, data: call.data, value: BigInt(call.value) });
          const receipt = await publicClient.waitForTransactionReceipt({ hash: fundTx });
          if (receipt.status !== 'success') throw new Error(`funding call "${call.title}" reverted`);
        }
        if (!fundTx) throw new Error(`no funding calls for job ${jobId}`);
        for (let i = 0; ; i++) {
          const confirmed = await api<{ status?: string }>('POST', `/v1/jobs/${jobId}/fund-confirm`, { txHash: fundTx });
          if (confirmed.status === 200 && confirmed.body.status === 'confirmed') return;
          if (confirmed.status !== 202 || i > 100) throw new Error(`fund-confirm answered ${confirmed.status}: ${JSON.stringify(confirmed.body).slice(0, 300)}`);
          await sleep(300);
        }
      },
      close,
    };
  } catch (err) {
    await close(log);
    throw err;
  }
}
