import { benchmarkResultSchema, type BenchmarkResult } from '@gpufarm/shared';
import { join } from 'node:path';
import type { AgentConfig } from '../config/config.js';
import { ensureStateDir, readJsonFile, readMachineFile, stateFiles, writeFileAtomic } from '../config/state.js';
import { AgentDaemon } from '../daemon/daemon.js';
import { rejectingRunner, type AssignmentRunner } from '../link/assignment-runner.js';
import { AGENT_VERSION, inventoryMonitor } from './context.js';

/** The last stored benchmark, if it still parses. */
export function storedBenchmark(stateDir: string): BenchmarkResult | null {
  const parsed = benchmarkResultSchema.safeParse(readJsonFile(stateFiles(stateDir).benchmark));
  return parsed.success ? parsed.data : null;
}

/**
 * `gf-agent run`: the daemon until SIGINT/SIGTERM. `runner` is the assignment runner; until the
 * runtime is wired it is `rejectingRunner()`, which refuses every assignment with its reason.
 */
export async function runDaemon(config: AgentConfig, log: (line: string) => void, runner: AssignmentRunner = rejectingRunner()): Promise<void> {
  const machine = readMachineFile(config.stateDir);
  if (!machine) throw new Error(`this machine is not enrolled (no ${stateFiles(config.stateDir).machine}): run "gf-agent enroll --server URL --token gfe_…" first`);
  ensureStateDir(config.stateDir);
  const files = stateFiles(config.stateDir);
  const daemon = new AgentDaemon(
    {
      inventory: inventoryMonitor(config, { probe: true }),
      runner,
      benchmark: () => storedBenchmark(config.stateDir),
      onStatus: (status) => {
        try {
          writeFileAtomic(files.status, `${JSON.stringify(status, null, 2)}\n`, 0o644);
        } catch (err) {
          log(`could not write ${files.status}: ${(err as Error).message}`);
        }
      },
      log,
    },
    {
      server: config.server ?? machine.server,
      machineToken: machine.machineToken,
      agentVersion: AGENT_VERSION,
      spoolDir: join(config.stateDir, 'spool'),
      logMemoryBytes: config.logMemoryBytes,
      heartbeatIntervalSeconds: config.heartbeatIntervalSeconds,
      inventoryIntervalSeconds: config.inventoryIntervalSeconds,
      reconnect: { initialMs: config.reconnectInitialMs, maxMs: config.reconnectMaxMs },
    },
  );
  log(`gf-agent ${AGENT_VERSION}: machine ${machine.machineId}, control plane ${config.server ?? machine.server}${config.simulateGpus ? `, simulated GPUs ${config.simulateGpus}` : ''}`);
  await daemon.start();
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log(`${signal}: stopping (running containers keep running)`);
      resolve();
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
  await daemon.stop();
}
