import type Docker from 'dockerode';
import { parseNvidiaSmiList } from '../inventory/gpu-probe.js';
import { execCommand } from '../docker/exec.js';
import { jobFields, type AgentLog } from '../logger/logger.js';
import { errorText } from '@gpufarm/shared';

/**
 * Running jobs that lose their GPUs. With the NVIDIA Container Toolkit, a Docker restart or a
 * `systemctl daemon-reload` can rewrite a running container's device rules so that it no longer
 * reaches `/dev/nvidia*`: the job goes on, and its next CUDA or NVML call fails ("Failed to
 * initialize NVML: Unknown Error"). The agent notices Docker restarts on the Engine's event
 * stream (`DockerRestartWatch`), checks each running GPU job then and every minute (a
 * daemon-reload leaves no Docker event), and a job whose container cannot list its GPUs any more
 * is failed as the machine's fault (`GpuAccessWatch`, wired in `daemon/gpu-access-setup.ts`).
 */

/** What `nvidia-smi -L` inside a job's container says: it sees its GPUs, lost them, or cannot tell. */
export type GpuAccess = { kind: 'ok' } | { kind: 'lost'; detail: string } | { kind: 'unknown'; detail: string };

/** nvidia-smi's words in a container whose device rules no longer let it reach the GPUs. */
const LOST_WORDS = /Failed to initialize NVML|Unknown Error|No devices were found|Unable to determine the device handle/i;
/** An exec whose executable the image does not have (Docker: exit 126/127 and runc's words). */
const NO_EXECUTABLE = /executable file not found|no such file or directory/i;

/**
 * The GPU access of a container from its `nvidia-smi -L` (pure): lost when NVML says so or a GPU
 * of the job is missing from the list; unknown when the image has no nvidia-smi (an image that
 * asks for no `utility` capability) or it failed otherwise.
 */
export function judgeContainerGpus(exitCode: number | null, output: string, uuids: readonly string[]): GpuAccess {
  const text = output.replace(/[^\x20-\x7e\n]/g, '').trim();
  const said = text.split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 2).join(' ').slice(0, 300);
  if (LOST_WORDS.test(text)) return { kind: 'lost', detail: `nvidia-smi -L in it said "${said}"` };
  if (exitCode === 126 || exitCode === 127 || NO_EXECUTABLE.test(text)) return { kind: 'unknown', detail: 'its image has no nvidia-smi' };
  if (exitCode !== 0) return { kind: 'unknown', detail: `nvidia-smi -L in it exited with ${exitCode ?? 'no code'}: ${said}` };
  const listed = new Set(parseNvidiaSmiList(text).map((g) => g.uuid));
  const missing = uuids.filter((u) => !listed.has(u));
  if (missing.length > 0) return { kind: 'lost', detail: `it sees ${uuids.length - missing.length} of its ${uuids.length} GPUs (missing ${missing.join(', ')})` };
  return { kind: 'ok' };
}

/** Runs `nvidia-smi -L` in a running container and judges it; a container Docker cannot exec into (it exited meanwhile) is unknown. */
export async function containerGpuAccess(docker: Docker, containerId: string, uuids: readonly string[], timeoutMs = 30_000): Promise<GpuAccess> {
  try {
    const run = await execCommand(docker, containerId, ['nvidia-smi', '-L'], timeoutMs);
    if (run.timedOut) return { kind: 'unknown', detail: `nvidia-smi -L in it did not answer within ${timeoutMs} ms` };
    return judgeContainerGpus(run.exitCode, run.output, uuids);
  } catch (err) {
    return { kind: 'unknown', detail: `Docker could not run nvidia-smi -L in it: ${errorText(err).trim().slice(0, 200)}` };
  }
}

/** A running job with GPUs (`DockerAssignmentRunner.gpuJobs`). */
export interface GpuJob {
  assignmentId: string;
  containerId: string;
  gpuUuids: string[];
  /** For the log: the job's id. */
  jobId: string;
}

export interface GpuAccessWatchDeps {
  /** The running jobs that hold GPUs. */
  jobs: () => GpuJob[];
  check: (job: GpuJob) => Promise<GpuAccess>;
  /** A job's container lost its GPUs; `trigger` says what prompted the check. */
  lost: (job: GpuJob, detail: string, trigger: string) => Promise<void>;
  log: AgentLog;
}

/** How often running GPU jobs are checked besides Docker restarts (a daemon-reload leaves no event). */
export const GPU_ACCESS_CHECK_INTERVAL_MS = 60_000;

/**
 * Checks that every running GPU job still reaches its GPUs: after each Docker restart
 * (`checkAll('the Docker daemon restarted')`) and every `intervalMs`. One round at a time; a
 * round asked for while one runs runs after it.
 */
export class GpuAccessWatch {
  private timer: NodeJS.Timeout | null = null;
  private round: Promise<void> = Promise.resolve();

  constructor(private readonly deps: GpuAccessWatchDeps) {}

  /** Checks every running GPU job once; resolves with the jobs found without their GPUs. */
  checkAll(trigger: string): Promise<GpuJob[]> {
    const next = this.round.then(() => this.checkRound(trigger));
    this.round = next.then(() => undefined, () => undefined);
    return next;
  }

  private async checkRound(trigger: string): Promise<GpuJob[]> {
    const lost: GpuJob[] = [];
    for (const job of this.deps.jobs()) {
      const access = await this.deps.check(job);
      if (access.kind === 'ok') continue;
      if (access.kind === 'unknown') {
        this.deps.log.child(jobFields(job)).warn(`assignment ${job.assignmentId}: its GPU access cannot be checked (${access.detail})`);
        continue;
      }
      lost.push(job);
      await this.deps.lost(job, access.detail, trigger);
    }
    return lost;
  }

  start(intervalMs = GPU_ACCESS_CHECK_INTERVAL_MS): void {
    this.timer = setInterval(() => void this.checkAll('the periodic check'), intervalMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/**
 * Notices Docker Engine restarts: follows the Engine's event stream (`GET /events`, daemon
 * events only, so it is quiet); when the stream ends (the daemon stopped or restarted) it
 * reconnects every `retryMs`, and once a new stream opens, the daemon is back: `onRestart`.
 */
export class DockerRestartWatch {
  private stream: NodeJS.ReadableStream | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly docker: Docker, private readonly options: { onRestart: () => void; retryMs?: number; log?: AgentLog }) {}

  /** Opens the first stream; resolves once it is open (or the first try failed and retries are scheduled). */
  start(): Promise<void> {
    return this.connect(false);
  }

  private async connect(afterDrop: boolean): Promise<void> {
    if (this.stopped) return;
    let stream: NodeJS.ReadableStream;
    try {
      stream = (await this.docker.getEvents({ filters: { type: ['daemon'] } })) as NodeJS.ReadableStream;
    } catch {
      this.retry(afterDrop);
      return;
    }
    if (this.stopped) {
      (stream as unknown as { destroy: () => void }).destroy();
      return;
    }
    this.stream = stream;
    const dropped = () => {
      if (this.stream !== stream) return;
      this.stream = null;
      if (!this.stopped) this.options.log?.warn('the Docker daemon closed its event stream (stopped or restarting): the running GPU jobs are checked once it is back');
      this.retry(true);
    };
    stream.on('data', () => undefined);
    stream.once('end', dropped);
    stream.once('close', dropped);
    stream.once('error', dropped);
    if (afterDrop) this.options.onRestart();
  }

  private retry(afterDrop: boolean): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.connect(afterDrop), this.options.retryMs ?? 1000);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const stream = this.stream;
    this.stream = null;
    (stream as unknown as { destroy?: () => void } | null)?.destroy?.();
  }
}
