import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { freePort } from '@gpufarm/shared/node';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicClient, createWalletClient, http, type Account, type Address, type Chain, type PublicClient, type Transport, type WalletClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type Anvil, ANVIL_ACCOUNTS, type S3rverProcess, startAnvil, startS3rver } from '@gpufarm/control-plane/testing';
import { chainFor, deployContracts, type Deployment, deploymentEnv } from '@gpufarm/control-plane/chain';
import { openPostgres } from '@gpufarm/control-plane/db';
import { createMigratedDatabase, TEST_DATABASE_URL } from '@gpufarm/control-plane/testing/database';
import { startHaproxy, waitForServersUp, type HaproxyProcess } from '@gpufarm/scripts/cluster/haproxy';
import { onEmergencyExit, spawnProcess, type TestProcess } from './processes.js';
import { until } from './wait.js';
import { testCommand } from '@gpufarm/shared/build/test-bundles';

export const ROOT = new URL('../../', import.meta.url).pathname;
export const CHAIN_ID = 4663;
export const OPERATOR = ANVIL_ACCOUNTS[0];
export const TREASURY = ANVIL_ACCOUNTS[4].address;
/** tUSDC minted to each customer wallet (dev accounts 1-3): 1,000,000 tUSDC. */
export const MINTED = 1_000_000_000_000n;
/** The wallet of the helper's own API key for polling (no test acts for it; it holds no funds). */
export const OBSERVER_WALLET: Address = '0x0000000000000000000000000000000000000b5e';
/** The PostgreSQL server `npm test` prepares; each marketplace gets a database of its own in it. */
export { TEST_DATABASE_URL };

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** `.gpufarm/images.json` written by `scripts/build-images.sh`: the local registry's images, pinned. */
export interface LocalImages {
  canary: { repository: string; digest: string; reference: string };
  busybox: { repository: string; digest: string; reference: string };
}

export function localImages(): LocalImages {
  const file = join(ROOT, '.gpufarm/images.json');
  if (!existsSync(file)) throw new Error(`${file} is missing: run scripts/test-env.sh (as root), which builds the test images into the local registry`);
  return (JSON.parse(readFileSync(file, 'utf8')) as { images: LocalImages }).images;
}

/**
 * `count` consecutive free TCP ports on 127.0.0.1, for a program that binds a block from one base
 * (`npm run cluster`). The block lies below the kernel's ephemeral range (32768 and up here), so a
 * `freePort()` of a test running beside it can never be handed one of its ports before it binds them.
 */
export async function freePortBlock(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * (12_000 - count));
    const held: Server[] = [];
    try {
      for (let port = base; port < base + count; port++) {
        const server = createServer();
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(port, '127.0.0.1', resolve);
        });
        held.push(server);
      }
      return base;
    } catch {
      // One port of the block is taken: try another block.
    } finally {
      await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
    }
  }
  throw new Error(`no block of ${count} free ports below 32000`);
}

export interface MarketplaceOptions {
  /** Control-plane environment over the harness's defaults (execution timings, for example). */
  env?: Record<string, string>;
  /** The escrow's challenge window; short, so releases happen inside the test. */
  challengeWindowSeconds?: number;
  /** The PostgreSQL server the marketplace's database is made in (default: `TEST_DATABASE_URL`'s). */
  postgresUrl?: string;
  /** More anvil arguments, such as `--state <file>` for a chain that survives `restartAnvil`. */
  anvilArgs?: string[];
  /**
   * A cluster: this many control-plane replicas on the one database, artifacts in s3rver, and
   * HAProxy in front (its URL is the marketplace's `url`; scripts/src/cluster/haproxy.ts).
   */
  replicas?: number;
  /** Per replica (0-based): more environment, and whether HAProxy gives it agent links only as a backup. */
  replica?: (index: number) => { env?: Record<string, string>; agentLinksBackup?: boolean };
}

/** The parts of a marketplace started with `replicas`. */
export interface Cluster {
  /** The replicas, named `cp1`, `cp2`, … as HAProxy's servers are. */
  replicas: { name: string; url: string; process: TestProcess }[];
  haproxy: HaproxyProcess;
  s3: S3rverProcess;
}

export interface EnrollmentTokenParams {
  farm: string;
  region: string;
  /** USD per GPU-hour, such as `"0.50"`. */
  priceUsd: string;
  payout: Address;
}

/**
 * The marketplace as separate processes: a fresh PostgreSQL database, anvil with the escrow and
 * the test stablecoin, and the control plane (its test bundle, shared/build/test-bundles.ts) on a
 * free port, or with `replicas` several of them behind HAProxy with artifacts in s3rver. Agents are started with `startAgent` (./agent.ts). Everything is stopped by pid,
 * containers of its agents removed and the database dropped when the test ends.
 */
export class Marketplace {
  readonly processes: TestProcess[] = [];
  readonly cleanups: (() => Promise<void>)[] = [];
  /** The key `waitForAvailable` polls with, made on its first wait. */
  private observerKey: Promise<string> | null = null;
  private constructor(
    readonly root: string,
    readonly url: string,
    readonly adminToken: string,
    public anvil: Anvil,
    private readonly anvilArgs: string[],
    readonly deployment: Deployment,
    readonly chain: Chain,
    readonly publicClient: PublicClient<Transport, Chain>,
    readonly controlPlane: TestProcess,
    readonly images: LocalImages,
    /** The marketplace's own PostgreSQL database. */
    readonly databaseUrl: string,
    /** The replicas, HAProxy and s3rver when started with `replicas`; null for one control plane. */
    readonly cluster: Cluster | null,
  ) {}

  static async start(t: Teardown, options: MarketplaceOptions = {}): Promise<Marketplace> {
    const images = localImages();
    const root = mkdtempSync(join(tmpdir(), 'gf-e2e-market-'));
    const stops: (() => Promise<void>)[] = [];
    let market: Marketplace | null = null;
    t.teardown(async () => {
      if (market) await market.stop();
      for (const stop of stops.reverse()) await stop().catch((err: unknown) => console.error(`e2e teardown: ${String(err)}`));
      rmSync(root, { recursive: true, force: true });
    });

    // The database: created here, dropped after the control plane stopped.
    const name = `gf_e2e_${randomBytes(6).toString('hex')}`;
    const serverUrl = options.postgresUrl ?? TEST_DATABASE_URL;
    if (serverUrl === TEST_DATABASE_URL) {
      // Cloned from the migrated template: the control plane's own migrate at start finds nothing to do.
      await createMigratedDatabase(name);
    } else {
      const admin = openPostgres(serverUrl, { max: 1 });
      await admin.query(`CREATE DATABASE ${name}`).finally(() => admin.close());
    }
    stops.push(async () => {
      const dropper = openPostgres(serverUrl, { max: 1 });
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.close();
      }
    });
    const databaseUrl = new URL(serverUrl);
    databaseUrl.pathname = `/${name}`;

    const anvilArgs = options.anvilArgs ?? [];
    const anvil = await startAnvil({ chainId: CHAIN_ID, args: anvilArgs });
    const forgetAnvil = onEmergencyExit(() => process.kill((market?.anvil ?? anvil).pid, 'SIGKILL'));
    stops.push(async () => {
      await (market?.anvil ?? anvil).stop();
      forgetAnvil();
    });
    const deployment = await deployContracts({
      rpcUrl: anvil.rpcUrl,
      chainId: CHAIN_ID,
      deployerKey: OPERATOR.privateKey,
      operator: OPERATOR.address,
      treasury: TREASURY,
      challengeWindowSeconds: options.challengeWindowSeconds ?? 10,
      withStablecoin: true,
      mint: [1, 2, 3].map((i) => ({ to: ANVIL_ACCOUNTS[i]!.address, amount: MINTED })),
    });
    const chain = chainFor(CHAIN_ID, anvil.rpcUrl);
    const publicClient = createPublicClient({ chain, transport: http(anvil.rpcUrl, { retryCount: 0 }), pollingInterval: 100 });

    const adminToken = randomBytes(32).toString('base64url');
    const env: Record<string, string> = {
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl.toString(),
      GF_ENVIRONMENT: 'local',
      ...deploymentEnv({ ...deployment, rpcUrl: anvil.rpcUrl }),
      GF_ADMIN_TOKEN: adminToken,
      GF_OPERATOR_PRIVATE_KEY: OPERATOR.privateKey,
      GF_CHAIN_HEALTH_MS: '500',
      GF_ESCROW_SWEEP_MS: '500',
      GF_HEARTBEAT_SECONDS: '1',
      GF_MATCH_INTERVAL_MS: '200',
      GF_EXECUTION_SWEEP_MS: '500',
      GF_ASSIGN_TIMEOUT_SECONDS: '20',
      GF_CANARY_IMAGE: images.canary.reference,
      GF_SHELL_IMAGE: images.busybox.reference,
      GF_LOG_LEVEL: 'warn',
      GF_CHAIN_FILE: '',
      ...options.env,
    };
    const startControlPlane = async (name: string, extra: Record<string, string>): Promise<{ process: TestProcess; url: string }> => {
      const port = await freePort();
      const [node, ...args] = testCommand('control-plane');
      const child = spawnProcess(name, node, args, {
        cwd: ROOT,
        env: { ...env, PORT: String(port), GF_DATA_DIR: join(root, name), ...extra },
      });
      stops.push(() => child.stop());
      const url = `http://127.0.0.1:${port}`;
      await until(
        async () => {
          if (!child.running()) throw new Error(`${name} exited:\n${child.tail()}`);
          const res = await fetch(`${url}/v1`).catch(() => null);
          return res?.status === 200;
        },
        `${name} to answer GET /v1`,
        { timeoutMs: 60_000, describe: () => child.tail(20) },
      ).catch((err: unknown) => {
        throw child.running() ? err : new Error(`${name} exited:\n${child.tail()}`);
      });
      return { process: child, url };
    };

    let cluster: Cluster | null = null;
    let controlPlane: TestProcess;
    let url: string;
    if (options.replicas) {
      const s3 = await startS3rver({ dir: join(root, 's3') });
      const forgetS3 = onEmergencyExit(() => process.kill(s3.pid, 'SIGKILL'));
      stops.push(async () => {
        await s3.stop();
        forgetS3();
      });
      const [front, stats] = [await freePort(), await freePort()];
      url = `http://127.0.0.1:${front}`;
      // Started one after the other: the first applies the migrations, the others find them done.
      const replicas: Cluster['replicas'] = [];
      for (let i = 1; i <= options.replicas; i++) {
        const name = `cp${i}`;
        replicas.push({ name, ...(await startControlPlane(name, { ...s3.env, GF_PUBLIC_URL: url, GF_TRUST_PROXY: 'true', ...options.replica?.(i - 1).env })) });
      }
      const haproxy = await startHaproxy({
        dir: root,
        bind: `127.0.0.1:${front}`,
        statsBind: `127.0.0.1:${stats}`,
        servers: replicas.map((r, i) => ({ name: r.name, address: new URL(r.url).host, agentLinksBackup: options.replica?.(i).agentLinksBackup ?? false })),
      });
      const forgetHaproxy = onEmergencyExit(() => process.kill(haproxy.pid, 'SIGKILL'));
      stops.push(async () => {
        await haproxy.stop();
        forgetHaproxy();
      });
      await waitForServersUp(haproxy.statsUrl);
      cluster = { replicas, haproxy, s3 };
      controlPlane = replicas[0]!.process;
    } else {
      const single = await startControlPlane('control-plane', {});
      controlPlane = single.process;
      url = single.url;
    }
    market = new Marketplace(root, url, adminToken, anvil, anvilArgs, deployment, chain, publicClient, controlPlane, images, databaseUrl.toString(), cluster);
    market.processes.push(...(cluster ? cluster.replicas.map((r) => r.process) : [controlPlane]));
    return market;
  }

  /**
   * Stops anvil (SIGTERM) and starts it again on the same port with the same chain id and
   * arguments: with `--state <file>` among them, the chain goes on where it was.
   */
  async restartAnvil(): Promise<void> {
    const port = Number(new URL(this.anvil.rpcUrl).port);
    await this.anvil.stop();
    this.anvil = await startAnvil({ chainId: CHAIN_ID, port, args: this.anvilArgs });
  }

  /** Reads the marketplace's own database, on a connection of its own. */
  async query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    const db = openPostgres(this.databaseUrl, { max: 1 });
    try {
      return await db.query<T>(sql, params as never[]);
    } finally {
      await db.close();
    }
  }

  /** A wallet of anvil's dev account `index` (1-3 hold tUSDC). */
  wallet(index: 1 | 2 | 3): WalletClient<Transport, Chain, Account> {
    return createWalletClient({ chain: this.chain, transport: http(this.anvil.rpcUrl, { retryCount: 0 }), account: privateKeyToAccount(ANVIL_ACCOUNTS[index].privateKey) });
  }

  /** A call to the admin API (`/admin/v1`, the operator's bearer token); throws on an error status. */
  async admin<T>(path: string, body: unknown): Promise<T> {
    const res = await fetch(`${this.url}/admin/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`POST /admin/v1${path} answered ${res.status}: ${text}`);
    return JSON.parse(text) as T;
  }

  /** A GET of the admin API (`/admin/v1`); throws on an error status. */
  async adminGet<T>(path: string): Promise<T> {
    const res = await fetch(`${this.url}/admin/v1${path}`, { headers: { authorization: `Bearer ${this.adminToken}` } });
    const text = await res.text();
    if (!res.ok) throw new Error(`GET /admin/v1${path} answered ${res.status}: ${text}`);
    return JSON.parse(text) as T;
  }

  /** A new API key with every customer scope for `wallet` (its account is made when new). */
  async createApiKey(wallet: Address): Promise<string> {
    const created = await this.admin<{ key: string }>('/api-keys', { walletAddress: wallet, scopes: ['jobs:create', 'jobs:read', 'artifacts:read', 'billing:read'] });
    return created.key;
  }

  /** A one-time enrollment token (`gfe_…`) for a machine of `farm` in `region` at `priceUsd` per GPU-hour. */
  async createEnrollmentToken(params: EnrollmentTokenParams): Promise<string> {
    const created = await this.admin<{ token: string }>('/enrollment-tokens', {
      farm: params.farm,
      regionKey: params.region,
      pricePerGpuHour: params.priceUsd,
      payoutAddress: params.payout,
    });
    return created.token;
  }

  /** Waits until the farm offers no available GPU in `/v1/capacity` (drained, or gone). */
  async waitForNoCapacity(farm: string, timeoutMs = 60_000): Promise<void> {
    await this.waitForAvailable(farm, (n) => n === 0, 'no available GPU', timeoutMs);
  }

  /** Waits until `GET /v1/capacity?farm=` lists the farm with at least `gpus` GPUs available. */
  async waitForCapacity(farm: string, gpus = 1, timeoutMs = 60_000): Promise<void> {
    await this.waitForAvailable(farm, (n) => n >= gpus, `${gpus} available GPU(s)`, timeoutMs);
  }

  /**
   * Polls `/v1/capacity?farm=` until the farm's available GPUs satisfy `enough`, with the
   * observer's key: anonymously, a wait longer than a few seconds spent the per-address budget
   * (60 per 60 s) that the test's own anonymous calls share, and both were answered 429.
   */
  private async waitForAvailable(farm: string, enough: (available: number) => boolean, what: string, timeoutMs: number): Promise<void> {
    const key = await (this.observerKey ??= this.createApiKey(OBSERVER_WALLET));
    let last: unknown = null;
    await until(
      async () => {
        const res = await fetch(`${this.url}/v1/capacity?farm=${encodeURIComponent(farm)}`, { headers: { authorization: `Bearer ${key}` } });
        last = await res.json();
        const offers = (last as { data?: { available: number }[] }).data ?? [];
        return enough(offers.reduce((sum, o) => sum + o.available, 0));
      },
      `farm ${farm} to offer ${what} in /v1/capacity`,
      { timeoutMs, describe: () => `${JSON.stringify(last)}\n${this.diagnostics(15)}` },
    );
  }

  /** The last lines of every process, for a failing test's message. */
  diagnostics(lines = 30): string {
    return this.processes.map((p) => `--- ${p.name} (pid ${p.pid}${p.running() ? '' : ', exited'}):\n${p.tail(lines)}`).join('\n');
  }

  async stop(): Promise<void> {
    for (const cleanup of this.cleanups.reverse()) await cleanup().catch((err: unknown) => console.error(`e2e teardown: ${String(err)}`));
    this.cleanups.length = 0;
  }
}
