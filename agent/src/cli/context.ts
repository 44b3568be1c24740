import Docker from 'dockerode';
import { loadConfig, workDirOf, type AgentConfig } from '../config/config.js';
import { dockerGpuProbe } from '../inventory/gpu-probe.js';
import { systemDriverHost } from '../inventory/driver-host.js';
import { nvidiaSmiReader } from '../inventory/gpu-reader.js';
import { systemHostReader } from '../inventory/host.js';
import { KernelLogWatcher } from '../inventory/kernel-log.js';
import { InventoryMonitor } from '../inventory/monitor.js';
import { parseSimulatedGpus } from '../inventory/simulated.js';
import { AGENT_VERSION } from './version.js';

/** Options every command takes. */
export interface GlobalOptions {
  config?: string;
  stateDir?: string;
  simulateGpus?: string;
  server?: string;
}

export { AGENT_VERSION };

export function configFrom(opts: GlobalOptions): AgentConfig {
  return loadConfig({ path: opts.config, overrides: { stateDir: opts.stateDir, simulateGpus: opts.simulateGpus, server: opts.server } });
}

/** Where dockerode connects: DOCKER_HOST, or the default socket. */
export function dockerEndpoint(): string {
  const host = process.env.DOCKER_HOST;
  if (!host) return '/var/run/docker.sock';
  return host.startsWith('unix://') ? host.slice('unix://'.length) : host;
}

export function dockerClient(): Docker {
  return new Docker();
}

export function simulateSpec(config: AgentConfig) {
  return config.simulateGpus && config.simulateGpus.trim() !== '' ? parseSimulatedGpus(config.simulateGpus) : null;
}

/** The inventory monitor with its real adapters; `probe: false` leaves the GPU probe out. */
export function inventoryMonitor(config: AgentConfig, options: { probe: boolean }): InventoryMonitor {
  return new InventoryMonitor(
    {
      gpus: nvidiaSmiReader({ command: config.nvidiaSmi }),
      host: systemHostReader(workDirOf(config)),
      probe: options.probe ? dockerGpuProbe(dockerClient(), { image: config.gpuProbeImage }) : null,
      kernelLog: config.kernelLog !== null && simulateSpec(config) === null ? new KernelLogWatcher(config.kernelLog) : null,
      driverHost: simulateSpec(config) === null ? systemDriverHost({ hostRoot: config.hostRoot }) : null,
      now: () => new Date(),
    },
    {
      agentVersion: AGENT_VERSION,
      simulate: simulateSpec(config),
      hostRefreshMs: 60_000,
      probeIntervalMs: config.gpuProbeIntervalSeconds * 1000,
      probeRetryMs: 60_000,
    },
  );
}
