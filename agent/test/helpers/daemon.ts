import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import type { ChallengeStarter } from '../../src/challenge/challenge.js';
import { AgentDaemon, type DaemonOptions } from '../../src/daemon/daemon.js';
import { dockerGpuProbe } from '../../src/inventory/gpu-probe.js';
import { nvidiaSmiReader } from '../../src/inventory/gpu-reader.js';
import { systemHostReader } from '../../src/inventory/host.js';
import { InventoryMonitor } from '../../src/inventory/monitor.js';
import { parseSimulatedGpus } from '../../src/inventory/simulated.js';
import type { AssignmentSpec, JsonLogLine } from '@gpufarm/shared';
import { memoryLog } from './log.js';
import { rejectingRunner, type AcceptResult, type AssignmentContext, type AssignmentRunner } from '../../src/link/assignment-runner.js';

export interface TestDaemonOptions {
  server: string;
  machineToken: string;
  /** Simulated GPUs, or the path of a (fake) nvidia-smi for real reads. */
  simulate?: string;
  nvidiaSmi?: string;
  runner?: AssignmentRunner;
  /** Starts GPU challenges (default: the daemon's, simulated ones on the CPU). */
  challenges?: ChallengeStarter;
  daemon?: Partial<DaemonOptions>;
}

/** A daemon wired as `gf-agent run` wires it (real Docker probe, real host reads), in a temp state dir. */
export function testDaemon(o: TestDaemonOptions): { daemon: AgentDaemon; inventory: InventoryMonitor; stateDir: string; logs: string[]; logLines: JsonLogLine[]; cleanup: () => Promise<void> } {
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-state-'));
  const memory = memoryLog();
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
    { inventory, runner: o.runner ?? rejectingRunner(), benchmark: () => null, log: memory.log, ...(o.challenges ? { challenges: o.challenges } : {}) },
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
    // The messages of its log lines, in order (a getter: lines keep coming).
    get logs() {
      return memory.messages();
    },
    logLines: memory.lines,
    cleanup: async () => {
      await daemon.stop();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

/**
 * The AssignmentRunner port without containers: it holds each assignment it takes (in `held`)
 * until the test reports for it and deletes it, and turns away those `refuse` refuses. It stands
 * in for containers, not for any service the agent talks to.
 */
export function holdingRunner(refuse: (spec: AssignmentSpec) => Extract<AcceptResult, { accepted: false }> | null = () => null) {
  const held = new Map<string, { spec: AssignmentSpec; ctx: AssignmentContext }>();
  const runner: AssignmentRunner = {
    accept: async (spec, ctx) => {
      const refusal = refuse(spec);
      if (refusal) return refusal;
      held.set(spec.assignmentId, { spec, ctx });
      return { accepted: true };
    },
    cancel: async () => undefined,
    running: async () => [...held.values()].map(({ spec, ctx }) => ({ assignmentId: spec.assignmentId, jobId: spec.jobId, state: 'running' as const, nextLogSeq: ctx.logs.nextSeq })),
    restore: async () => undefined,
    setPartitioned: () => undefined,
    contactLost: () => undefined,
    close: async () => undefined,
  };
  return { runner, held };
}
