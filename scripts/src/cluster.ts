import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, writeFileSync, type WriteStream } from 'node:fs';
import { join, resolve } from 'node:path';
import { ANVIL_ACCOUNTS, REDIS_INSTALL_HINT, redisServerVersion, startRedisServer, startS3rver } from '@gpufarm/control-plane/testing';
import { loadConfig } from '@gpufarm/control-plane/config';
import { openPostgres } from '@gpufarm/control-plane/db';
import { LOCAL_CUSTOMER, localChainEnv, startLocalChain } from './chain/local-chain.js';
import { HAPROXY_INSTALL_HINT, haproxyVersion } from './cluster/haproxy.js';
import { startReplicaSet } from './cluster/replica-set.js';
import { LOCAL_FARM, localGpus, prepareAgentImages, startLocalAgent, type LocalAgent } from './local-agent.js';
import { Supervisor } from './supervisor.js';
import { buildDashboardOrExplain } from './web-build.js';
import { errorText } from '@gpufarm/shared';
import { scriptsEnv } from './env.js';

/** The environment's settings, checked before anything starts: a bad one is named and nothing runs. */
const given = (() => {
  try {
    return scriptsEnv();
  } catch (err) {
    console.error(`npm run cluster: ${errorText(err)}`);
    return process.exit(2);
  }
})();

/** The PostgreSQL server `npm test` prepares (scripts/test-env.sh); the cluster gets a database of its own in it. */
const POSTGRES_URL = given.GF_CLUSTER_POSTGRES_URL;
/** The cluster's database in that server (GF_CLUSTER_DATABASE: another name, such as a test's own). */
const DATABASE = given.GF_CLUSTER_DATABASE;
const REPLICAS = 3;
const AGENTS = 2;
/** HAProxy's front; the replicas listen on the next ports, its stats page on front + 9 (GF_CLUSTER_PORT moves them all). */
const FRONT_PORT = given.GF_CLUSTER_PORT;
const LOCAL_CHALLENGE_WINDOW_SECONDS = 300;
const LOCAL_PAYOUT = ANVIL_ACCOUNTS[2];

const say = (line: string) => console.log(`[cluster] ${line}`);

/** Creates the cluster's database when missing; throws with what to run when PostgreSQL does not answer. */
async function ensureDatabase(): Promise<string> {
  const admin = openPostgres(POSTGRES_URL, { max: 1 });
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (found.length === 0) {
      await admin.query(`CREATE DATABASE ${DATABASE}`);
      say(`database ${DATABASE} created`);
    }
  } catch (err) {
    throw new Error(
      `PostgreSQL does not answer at ${POSTGRES_URL.replace(/:[^:@/]*@/, ':…@')} (${errorText(err)}).\n` +
        'As root, bash scripts/test-env.sh installs and starts it with the gpufarm role (npm test does the same); or start the installed server with: sudo pg_ctlcluster <version> main start\n' +
        'Another server: set GF_CLUSTER_POSTGRES_URL to a URL whose role may create databases.',
      { cause: err },
    );
  } finally {
    await admin.close();
  }
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${DATABASE}`;
  return url.toString();
}

/**
 * `npm run cluster`: the marketplace as a deployment runs it, on this machine. PostgreSQL (the
 * system server, database `gpufarm_cluster`), a local chain (anvil with the escrow, as `npm
 * start` runs it), s3rver as the artifact store, one redis-server holding the replicas' shared
 * rate limits, three control-plane replicas on that one database with `GF_ARTIFACT_STORE=s3`
 * and `GF_REDIS_URL`, HAProxy in front (scripts/src/cluster/haproxy.ts) and two local agents
 * with simulated GPUs enrolled through HAProxy. State and each process's log live in
 * `<GF_DATA_DIR>/cluster`. A replica, an agent or Redis that dies is started again; without the
 * chain, s3rver or HAProxy everything stops. Ctrl-C stops every process it started, by pid.
 */
async function main(): Promise<number> {
  const config = loadConfig({ ...process.env, DATABASE_URL: undefined });
  const dir = resolve(config.dataDir, 'cluster');
  const logDir = join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const logs = new Map<string, WriteStream>();
  const logTo = (name: string) => (line: string) => {
    let stream = logs.get(name);
    if (!stream) logs.set(name, (stream = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' })));
    stream.write(`${line}\n`);
  };

  if (haproxyVersion() === null) throw new Error(HAPROXY_INSTALL_HINT);
  if (redisServerVersion() === null) throw new Error(REDIS_INSTALL_HINT);
  const databaseUrl = await ensureDatabase();
  const supervisor = new Supervisor(say, 'npm run cluster');
  // Every signal is handled, not only the first: a signal to the whole process group (timeout,
  // CI runners, job control) reaches this process more than once (npm forwards it too), and an
  // unhandled second one would end it mid-stop with its children still running.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => void supervisor.stopAll(`${signal}: stopping the agents, HAProxy, the replicas, Redis, s3rver and the chain`, 0));
  }
  const agents: LocalAgent[] = [];
  try {
    const docker = await prepareAgentImages(say, 'npm run cluster');
    if (!docker.images) say(`no agents: ${docker.problem}`);

    const chain = await startLocalChain({ dataDir: dir, chainId: config.chainId, challengeWindowSeconds: LOCAL_CHALLENGE_WINDOW_SECONDS });
    supervisor.watch('the local chain (anvil)', chain.anvil);
    const s3 = await startS3rver({ dir: join(dir, 's3'), detached: true, log: logTo('s3rver') });
    supervisor.watch('s3rver', s3);
    // The replicas' shared rate limits, nothing kept on disk. The replicas count in memory while
    // it is away, so it is started again (on its port) rather than stopping everything.
    const redis = await startRedisServer({ dir, detached: true, log: logTo('redis') });
    supervisor.watch('Redis', redis, { restart: () => startRedisServer({ port: redis.port, dir, detached: true, log: logTo('redis') }) });

    // The replicas serve web/dist at /dashboard/.
    const dashboardProblem = await buildDashboardOrExplain(say);

    const adminToken = given.GF_ADMIN_TOKEN ?? randomBytes(32).toString('base64url');
    writeFileSync(join(dir, 'admin-token'), `${adminToken}\n`, { mode: 0o600 });
    say(`starting ${REPLICAS} control-plane replicas and HAProxy (logs in ${logDir})`);
    const set = await startReplicaSet({
      count: REPLICAS,
      dir,
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl,
        GF_ADMIN_TOKEN: adminToken,
        GF_LOG_LEVEL: given.GF_LOG_LEVEL ?? 'info',
        GF_CHAIN_FILE: '',
        GF_CHAIN_HEALTH_MS: '2000',
        GF_ESCROW_SWEEP_MS: '2000',
        ...(docker.images && !given.GF_CANARY_IMAGE ? { GF_CANARY_IMAGE: docker.images.images.canary.reference } : {}),
        ...(docker.images && !given.GF_SHELL_IMAGE ? { GF_SHELL_IMAGE: docker.images.images.busybox.reference } : {}),
        ...localChainEnv(chain),
        ...s3.env,
        GF_REDIS_URL: redis.url,
      },
      ports: { front: FRONT_PORT, stats: FRONT_PORT + 9, replicas: Array.from({ length: REPLICAS }, (_, i) => FRONT_PORT + 1 + i) },
      log: (name, line) => logTo(name)(line),
    });
    for (const replica of set.replicas) {
      supervisor.watch(`replica ${replica.name}`, replica.child, { restart: () => replica.restart() });
    }
    supervisor.watch('HAProxy', set.haproxy);

    if (docker.images) {
      const gpus = localGpus();
      if (process.getuid?.() !== 0) say("note: the agents loop-mount each job's /output, which needs root; run as root (sudo -E npm run cluster) for jobs to run");
      for (let i = 1; i <= AGENTS; i++) {
        const name = `agent-${i}`;
        const start = () =>
          startLocalAgent({
            server: set.url,
            adminToken,
            stateDir: join(dir, name),
            payout: LOCAL_PAYOUT.address,
            simulateGpus: gpus,
            egressProxyImage: docker.images!.images['egress-proxy']?.reference ?? null,
            // One host, several agents: each its own metrics port (9464, 9465, …).
            metricsListen: `127.0.0.1:${9463 + i}`,
            log: logTo(name),
          });
        say(`starting ${name} (farm ${LOCAL_FARM.slug}, ${gpus ? `simulated GPUs ${gpus}` : 'the GPUs nvidia-smi reports'}) through HAProxy`);
        const agent = await start();
        agents.push(agent);
        supervisor.watch(name, agent, { restart: start });
      }
    }

    console.log(`
gpufarm cluster is running: ${REPLICAS} replicas on PostgreSQL (${DATABASE}), artifacts in s3rver, rate limits in Redis, HAProxy in front

  API (HAProxy)    ${set.url}/v1   (pid ${set.haproxy.pid}; config ${set.haproxy.configFile})
  dashboard        ${set.url}/dashboard/${dashboardProblem ? `   ${dashboardProblem}` : ''}
  HAProxy stats    ${set.statsUrl}
${set.replicas.map((r) => `  replica ${r.name}      ${r.url}/v1   (pid ${r.child.pid})`).join('\n')}
  S3 (s3rver)      ${s3.endpoint}   (bucket ${s3.bucket}, objects in ${s3.dir}, pid ${s3.pid})
  Redis            ${redis.url}   (the replicas' shared rate limits, pid ${redis.pid})
  chain (anvil)    ${chain.anvil.rpcUrl}   (escrow ${chain.deployment.escrow}, pid ${chain.anvil.pid})
  customer wallet  ${LOCAL_CUSTOMER.address}  (anvil dev account 1; key ${LOCAL_CUSTOMER.privateKey}, a public test key)
${agents.length > 0 ? agents.map((a, i) => `  agent-${i + 1}          machine ${a.machineId} (pid ${a.pid})`).join('\n') : '  agents           none (see above)'}
  logs             ${logDir}

Run the demo job through HAProxy (in another terminal):
  GF_DATA_DIR=${dir} GF_ENDPOINT=${set.url} GF_ADMIN_TOKEN=$(cat ${join(dir, 'admin-token')}) npm run demo

Kill a replica (kill -9 <pid>) to watch its agents move to another; it is started again.
Stop everything with Ctrl-C.`);
  } catch (err) {
    await supervisor.stopAll(`npm run cluster failed: ${errorText(err)}`, 1);
  }
  const code = await supervisor.done;
  for (const stream of logs.values()) stream.end();
  return code;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`npm run cluster: ${errorText(err)}`);
    process.exit(1);
  },
);
