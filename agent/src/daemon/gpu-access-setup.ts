import type Docker from 'dockerode';
import { CONTAINER_GPU_LOSS_FIX, reasonWithFix } from '@gpufarm/shared';
import type { InventoryMonitor } from '../inventory/monitor.js';
import type { DockerAssignmentRunner } from '../runner/docker-runner.js';
import { containerGpuAccess, DockerRestartWatch, GpuAccessWatch, GPU_ACCESS_CHECK_INTERVAL_MS, type GpuJob } from '../runtime/gpu-access.js';
import { jobFields, type AgentLog } from '../logger/logger.js';

export interface GpuAccessGuardSetup {
  docker: Docker;
  runner: Pick<DockerAssignmentRunner, 'gpuJobs' | 'failForMachine'>;
  inventory: Pick<InventoryMonitor, 'containerGpuLost'>;
  log: AgentLog;
  /** Overrides `GPU_ACCESS_CHECK_INTERVAL_MS`. */
  intervalMs?: number;
  /** How often a dropped event stream is opened again (default 1 s). */
  retryMs?: number;
}

/** The running guard: `stop()` ends the timer and the event stream. */
export interface GpuAccessGuard {
  watch: GpuAccessWatch;
  restarts: DockerRestartWatch;
  stop(): void;
}

/**
 * What a job's lost GPUs mean on this machine: the job is stopped and reported failed as the
 * machine's fault (`gpu_lost`: retried on another machine, not charged), and the machine is
 * unhealthy, with the fix, until a GPU probe after it passes. Checked after every Docker restart
 * and every `intervalMs`. Wired in `gf-agent run` on machines with real GPUs.
 */
export function gpuAccessGuard(setup: GpuAccessGuardSetup): GpuAccessGuard {
  const watch = new GpuAccessWatch({
    jobs: () => setup.runner.gpuJobs(),
    check: (job: GpuJob) => containerGpuAccess(setup.docker, job.containerId, job.gpuUuids),
    lost: async (job, detail, trigger) => {
      setup.log.child(jobFields(job)).error(`assignment ${job.assignmentId}: its container lost access to its GPUs (${detail}; found by ${trigger}): failing it as the machine's fault`);
      setup.inventory.containerGpuLost(
        reasonWithFix(
          `a running job's container lost access to its GPUs (${detail}), as happens when the Docker daemon restarts or systemd reloads its units: the job was stopped and is retried on another machine, and this machine is offered again once a new container sees the GPUs`,
          CONTAINER_GPU_LOSS_FIX,
        ),
      );
      await setup.runner.failForMachine(job.assignmentId, {
        code: 'gpu_lost',
        message: `the job's container lost access to its GPUs (${detail}) after the machine's Docker daemon restarted or systemd reloaded its units`,
      });
    },
    log: setup.log,
  });
  const restarts = new DockerRestartWatch(setup.docker, {
    onRestart: () => void watch.checkAll('a Docker daemon restart'),
    retryMs: setup.retryMs ?? 1000,
    log: setup.log,
  });
  void restarts.start();
  watch.start(setup.intervalMs ?? GPU_ACCESS_CHECK_INTERVAL_MS);
  return {
    watch,
    restarts,
    stop: () => {
      watch.stop();
      restarts.stop();
    },
  };
}
