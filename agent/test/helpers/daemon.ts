import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { AgentDaemon, type DaemonOptions } from '../../src/daemon/daemon.js';
import { dockerGpuProbe } from '../../src/inventory/gpu-probe.js';
import { nvidiaSmiReader } from '../../src/inventory/gpu-reader.js';
import { systemHostReader } from '../../src/inventory/host.js';
import { InventoryMonitor } from '../../src/inventory/monitor.js';
import { parseSimulatedGpus } from '../../src/inventory/simulated.js';
import { rejectingRunner, type AssignmentRunner } from '../../src/link/assignment-runner.js';

export interface TestDaemonOptions {
  server: string;
  machineToken: string;
  /** Simulated GPUs, or the path of a (fake) nvidia-smi for real reads. */
  simulate?: string;
  nvidiaSmi?: string;
  runner?: AssignmentRunner;
  daemon?: Partial<DaemonOptions>;
}

/** A daemon wired as `gf-agent run` wires it (real Docker probe, real host reads), in a temp state dir. */
export function testDaemon(o: TestDaemonOptions): { daemon: AgentDaemon; inventory: InventoryMonitor; stateDir: string; logs: string[]; cleanup: () => Promise<void> } {
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-state-'));
  const logs: string[] = [];
  const inventory = new InventoryMonitor(
    {
      gpus: nvidiaSmiReader({ command: o.nvidiaSmi ?? 'nvidia-smi' }),
      host: systemHostReader(stateDir),
      // A probe image that is not on this machine: the probe fails truthfully and fast.
      probe: dockerGpuProbe(new Docker(), { image: 'gpufarm/test-no-such-probe-image:1' }),
      now: () => new Date(),
    },
    { agentVersion: '0.0.0-test', simulate: o.simulate ? parseSimulatedGpus(o.simulate) : null, hostRefreshMs: 60_000, probeIntervalMs: 600_000, probeRetryMs: 600_000 },
  );
  const daemon = new AgentDaemon(
    { inventory, runner: o.runner ?? rejectingRunner(), benchmark: () => null, log: (l) => logs.push(l) },
    {
      server: o.server,
      machineToken: o.machineToken,
      agentVersion: '0.0.0-test',
      spoolDir: join(stateDir, 'spool'),
      logMemoryBytes: 8 * 1024 * 1024,
      heartbeatIntervalSeconds: 10,
      inventoryIntervalSeconds: 10,
      reconnect: { initialMs: 20, maxMs: 200 },
      ...o.daemon,
    },
  );
  return {
    daemon,
    inventory,
    stateDir,
    logs,
    cleanup: async () => {
      await daemon.stop();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
