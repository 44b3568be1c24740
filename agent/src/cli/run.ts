import { benchmarkResultSchema, errorText, parseListenSetting, type BenchmarkResult } from '@gpufarm/shared';
import { startMetricsListener, type MetricsListener } from '@gpufarm/shared/node';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { workDirOf, type AgentConfig } from '../config/config.js';
import { ensureStateDir, readJsonFile, readMachineFile, stateFiles, writeFileAtomic } from '../config/state.js';
import { AgentDaemon } from '../daemon/daemon.js';
import { dockerRunner } from '../daemon/runner-setup.js';
import { openImageCache } from '../daemon/image-cache-setup.js';
import type { DockerAssignmentRunner } from '../runner/docker-runner.js';
import { gpuAccessGuard, type GpuAccessGuard } from '../daemon/gpu-access-setup.js';
import { STOP_GRACE_SECONDS } from '../runtime/docker-runtime.js';
import { createAgentMetrics, type AgentMetrics } from '../metrics/metrics.js';
import { prepareBenchmarkImage } from '../benchmark/gpu-bench-image.js';
import { dockerChallenges } from '../challenge/container-challenge.js';
import { cpuChallenge } from '../challenge/cpu-challenge.js';
import type { AgentLog } from '../logger/logger.js';
import { AGENT_VERSION, dockerClient, inventoryMonitor, simulateSpec } from './context.js';

/** The last stored benchmark, if it still parses. */
export function storedBenchmark(stateDir: string): BenchmarkResult | null {
  const parsed = benchmarkResultSchema.safeParse(readJsonFile(stateFiles(stateDir).benchmark));
  return parsed.success ? parsed.data : null;
}

/**
 * `gf-agent run`: the daemon until SIGINT/SIGTERM, running its assignments in Docker (containers
 * labelled with the machine id, job folders under `work_dir`, uploads to the control plane,
 * records signed with the machine key). On SIGINT/SIGTERM it stops supervising and leaves the
 * containers running: the next start restores them. Its log is `logger`'s JSON lines, each
 * with the machine's id (a job's also with the job's and the assignment's).
 */
export async function runDaemon(config: AgentConfig, logger: AgentLog): Promise<void> {
  const machine = readMachineFile(config.stateDir);
  if (!machine) throw new Error(`this machine is not enrolled (no ${stateFiles(config.stateDir).machine}): run "gf-agent enroll --server URL --token gfe_…" first`);
  const log = logger.child({ machineId: machine.machineId });
  ensureStateDir(config.stateDir);
  const files = stateFiles(config.stateDir);
  const server = config.server ?? machine.server;
  const inventory = inventoryMonitor(config, { probe: true });
  // The cache never evicts what the runner's assignments need; the runner is made just below.
  let runner: DockerAssignmentRunner | null = null;
  const images = await openImageCache({
    docker: dockerClient(),
    stateDir: config.stateDir,
    workDir: workDirOf(config),
    budgetBytes: config.imageCacheBytes,
    prepullImages: config.prepullImages,
    inUse: () => runner?.heldImages() ?? [],
    log,
  });
  runner = dockerRunner({
    docker: dockerClient(),
    server,
    machineId: machine.machineId,
    machineToken: machine.machineToken,
    machineKeyPem: readFileSync(files.privateKey, 'utf8'),
    workDir: workDirOf(config),
    simulated: simulateSpec(config) !== null,
    jobLogKeepBytes: config.jobLogKeepBytes,
    minFreeDiskBytes: config.minFreeDiskBytes,
    egressProxyImage: config.egressProxyImage,
    offeredGpus: () => {
      const snap = inventory.latest;
      return snap?.health.status === 'healthy' ? snap.detected.map((g) => g.uuid) : [];
    },
    images,
    log,
  });
  let metrics: AgentMetrics | null = null;
  const daemon: AgentDaemon = new AgentDaemon(
    {
      inventory,
      runner,
      images,
      onReport: (status) => metrics?.report(status),
      benchmark: () => storedBenchmark(config.stateDir),
      // GPU challenges run gpu-bench in the benchmark's image on real GPUs, the CPU on simulated ones.
      challenges: simulateSpec(config) !== null ? (spec) => cpuChallenge(spec) : dockerChallenges({ docker: dockerClient(), image: config.benchmarkImage, owner: machine.machineId }),
      onStatus: (status) => {
        try {
          writeFileAtomic(files.status, `${JSON.stringify(status, null, 2)}\n`, 0o644);
        } catch (err) {
          log.warn(`could not write ${files.status}: ${errorText(err)}`);
        }
      },
      log,
    },
    {
      server,
      machineToken: machine.machineToken,
      agentVersion: AGENT_VERSION,
      spoolDir: join(config.stateDir, 'spool'),
      logMemoryBytes: config.logMemoryBytes,
      heartbeatIntervalSeconds: config.heartbeatIntervalSeconds,
      inventoryIntervalSeconds: config.inventoryIntervalSeconds,
      reconnect: { initialMs: config.reconnectInitialMs, maxMs: config.reconnectMaxMs },
      partition: { capSeconds: config.partitionGraceSeconds, stopSeconds: STOP_GRACE_SECONDS },
    },
  );
  log.info({ agentVersion: AGENT_VERSION }, `gf-agent ${AGENT_VERSION}: machine ${machine.machineId}, control plane ${server}${config.simulateGpus ? `, simulated GPUs ${config.simulateGpus}` : ''}`);
  metrics = createAgentMetrics({ inventory: () => inventory.latest, linkUp: () => daemon.link.ready });
  const metricsListener = await serveMetrics(config, metrics, log);
  await daemon.start();
  let guard: GpuAccessGuard | null = null;
  if (simulateSpec(config) === null) {
    // The benchmark's image is made on the daemon's first start on a machine, from the program
    // in this package: the first benchmark does not wait for it and no registry is involved.
    prepareBenchmarkImage(dockerClient(), config.benchmarkImage).then(
      (line) => log.info(line),
      (e: unknown) => log.warn(`benchmark image: ${errorText(e)}`),
    );
    // Running jobs whose containers lose their GPUs (a Docker restart, a systemd reload).
    guard = gpuAccessGuard({ docker: dockerClient(), runner, inventory, log });
  }
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info(`${signal}: stopping (running containers keep running)`);
      resolve();
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
  guard?.stop();
  await daemon.stop();
  await metricsListener?.close();
}

/**
 * Starts `/metrics` on `metrics_listen`. An address that cannot be bound (another agent or
 * exporter holds the port) is logged and the agent runs on without metrics: jobs matter more.
 */
async function serveMetrics(config: AgentConfig, metrics: AgentMetrics, log: AgentLog): Promise<MetricsListener | null> {
  const listen = parseListenSetting(config.metricsListen);
  if (listen === null || listen === 'off') return null;
  try {
    const listener = await startMetricsListener(metrics.registry, listen);
    log.info(`metrics: ${listener.url}/metrics`);
    return listener;
  } catch (err) {
    log.warn(`metrics: cannot listen on ${config.metricsListen} (${(err as NodeJS.ErrnoException).code ?? errorText(err)}); running without /metrics (set metrics_listen to another address, or off)`);
    return null;
  }
}
