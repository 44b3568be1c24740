import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { AssignmentSpec } from '@gpufarm/shared';
import { JOB_DNS, LABEL_EGRESS, removeEgress, startEgress } from '../egress/network.js';
import { checkContainerConfig, ContainerConfigError, toContainerConfig, type MachineFacts } from './container-config.js';
import { jobIdsIn } from './container-files.js';
import { ContainerSupervisor, systemWriter, type ContainerSupervisorOptions, type JobHandle, type WaitResult } from './container-supervisor.js';
import { RuntimeError } from './errors.js';
import { ensureImage, imageRunName, type ResolvedImage } from './image.js';
import { jobUser } from './job-user.js';
import { downloadInputs } from './inputs.js';
import { jobDir, readJson, writeJson, type JobExit, type JobState } from './job-state.js';
import { assignmentLabels, containerName, LABEL_ASSIGNMENT, ownerFilter } from './labels.js';
import { LogFile, LOG_KEEP_BYTES, writeLogArtifact } from './log-file.js';
import type { LogSink } from './log-lines.js';
import { giveOutputTo, prepareOutputMount, releaseOutputMount, type OutputMount } from './output-mount.js';

export { DetachedError } from './errors.js';
export type { JobHandle } from './container-supervisor.js';

/** The values of settled promises, or the first rejection's reason thrown. */
function settled<T extends readonly unknown[]>(results: { [K in keyof T]: PromiseSettledResult<T[K]> }): T {
  const failed = (results as readonly PromiseSettledResult<unknown>[]).find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return (results as readonly PromiseSettledResult<unknown>[]).map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Seconds between SIGTERM and SIGKILL when a job is stopped (timeout, cancel). */
export const STOP_GRACE_SECONDS = 10;

/**
 * Told of the images jobs use (the agent's image cache, `image-cache/`): `pulled` when a start
 * pulled its image (before the container is created), `used` once a container started from it.
 */
export interface ImagePullObserver {
  pulled(assignmentId: string, requested: string, image: ResolvedImage): Promise<void>;
  used(imageId: string): Promise<void>;
}

/** What the runtime needs; wired once in the agent's main.ts. */
export interface RuntimeDeps {
  docker: Docker;
  machine: MachineFacts;
  /** Names this agent on its containers' labels (the machine id); only its own are touched. */
  owner: string;
  /** Where per-assignment folders live (inputs, output mount, log artifact, state). */
  stateDir: string;
  /** Overrides `STOP_GRACE_SECONDS`. */
  stopGraceSeconds?: number;
  /** false forces the watchdog instead of a loop-mounted /output (tests, hosts without loop devices). */
  allowLoopMounts?: boolean;
  /** Bytes of a job's log kept at each end of its log artifact (default `LOG_KEEP_BYTES`). */
  logKeepBytes?: number;
  /** Headers of an input download from `url` (the machine token when it is the control plane's). */
  inputHeaders?: (url: string) => Record<string, string>;
  /** The image cache, told of pulls and uses; none: images are pulled and never tracked. */
  images?: ImagePullObserver;
  clock?: () => number;
}

/** Options of `start` and `resume`. */
export interface SuperviseOptions {
  /** Lines up to this cursor's line in Docker's order (from the link's spool) are not sent to the sink again. */
  sinkAfter?: string | null;
  /**
   * `start` only: told when a pull begins (`pulling`, never for an image already on the
   * machine) and when the image is ready and the container is being made (`starting`); the
   * control plane times the start's phases by these reports.
   */
  phase?: (state: 'pulling' | 'starting') => void;
}

/**
 * The container runtime through Docker Engine. `start` pulls, downloads inputs, prepares the
 * output mount, creates and starts the container and returns once it runs; its lines flow to
 * the sink until it exits. `resume` supervises a container found after a restart (see
 * `restore/`). `release` removes the container, the mount and the folder once results are
 * uploaded.
 */
export class DockerRuntime {
  private readonly now: () => number;
  private readonly grace: number;
  private readonly logKeepBytes: number;

  constructor(readonly deps: RuntimeDeps) {
    this.now = deps.clock ?? Date.now;
    this.grace = deps.stopGraceSeconds ?? STOP_GRACE_SECONDS;
    this.logKeepBytes = deps.logKeepBytes ?? LOG_KEEP_BYTES;
  }

  dirOf(assignmentId: string): string {
    return jobDir(this.deps.stateDir, assignmentId);
  }

  /**
   * Runs an assignment. Resolves once the container is running.
   * @throws ContainerConfigError (refuse the assignment: `invalid`, `unsupported`, `conflict`, `duplicate`)
   * @throws RuntimeError (`pull_failed`, `digest_mismatch`, `input_failed`, `create_failed`, `internal`)
   */
  async start(spec: AssignmentSpec, sink: LogSink, opts: SuperviseOptions = {}): Promise<JobHandle> {
    const dir = this.dirOf(spec.assignmentId);
    if (await readJson<JobState>(join(dir, 'state.json'))) {
      throw new ContainerConfigError('duplicate', `assignment ${spec.assignmentId} already ran on this machine`);
    }
    const name = containerName(this.deps.owner, spec.assignmentId);
    // Refuse a request the machine cannot honour before pulling anything.
    checkContainerConfig(spec, this.deps.machine);

    await mkdir(join(dir, 'inputs'), { recursive: true, mode: 0o700 });
    const { file: log } = await LogFile.open(join(dir, 'log.jsonl'), this.logKeepBytes);
    const system = systemWriter(log, sink, this.now);
    let started = false;
    let outputReady: Promise<OutputMount> | null = null;
    try {
      // The pull, the downloads and mkfs overlap; the container is created while /output is
      // still being mounted (a bind mount resolves its source at start, not at create).
      await mkdir(join(dir, 'output'), { recursive: true });
      outputReady = prepareOutputMount(dir, spec.outputRules, { allowLoop: this.deps.allowLoopMounts });
      outputReady.catch(() => undefined);
      const [image, inputs] = settled(
        await Promise.allSettled([this.pullImage(spec, system, opts.phase), downloadInputs(spec.inputs, join(dir, 'inputs'), system, this.deps.inputHeaders)]),
      );
      // An allowlist job runs on its own internal network, behind its proxy (egress/network.ts).
      const { egress } = this.deps.machine;
      const network = spec.networkPolicy.mode === 'allowlist' && egress
        ? await startEgress(this.deps.docker, egress, { owner: this.deps.owner, assignmentId: spec.assignmentId, jobId: spec.jobId, allow: spec.networkPolicy.allow }, system)
        : null;
      const config = toContainerConfig(spec, this.deps.machine, {
        name,
        image: image.reference,
        labels: assignmentLabels(this.deps.owner, spec.assignmentId, spec.jobId, spec.maxRuntimeSeconds),
        inputs,
        outputHostPath: join(dir, 'output'),
        imageUser: image.user,
        ...(network ? { network: { name: network.network, env: network.env, dns: JOB_DNS, sysctls: network.sysctls } } : {}),
      });
      let container: Docker.Container;
      try {
        container = await this.deps.docker.createContainer(config);
      } catch (err) {
        throw new RuntimeError('create_failed', `creating the container failed: ${(err as Error).message}`, { cause: err });
      }
      // dockerode: wait() before start() returns at once; 'next-exit' waits for this run's exit.
      // Sent as early as possible so dockerd has it before the start (the supervisor also watches
      // for the end of the logs, should the wait miss a very short run).
      const exited = container.wait({ condition: 'next-exit' }) as Promise<WaitResult>;
      exited.catch(() => undefined);
      // The ids of the image's USER, for /output: Docker resolves the same name at start.
      const user = jobUser(image.user);
      const [output, ids] = settled(await Promise.allSettled([outputReady, jobIdsIn(container, user)]));
      system(output.kind === 'loop'
        ? `/output is a ${output.limitBytes}-byte filesystem (loop-mounted ext4${output.nosymfollow ? ', nosymfollow' : ''}): writes past it fail`
        : `/output limited to ${output.limitBytes} bytes by a watchdog (${output.reason}): the job is stopped past it`);
      const given = await giveOutputTo(output.dir, ids).catch((err: unknown) => {
        throw new RuntimeError('create_failed', `giving /output to ${ids.uid}:${ids.gid} failed: ${(err as Error).message}`, { cause: err });
      });
      system(`runs as ${ids.uid}:${ids.gid} (${image.user.trim() === '' ? 'the image names no USER' : `the image's USER ${user}`})${given
        ? ', the owner of /output'
        : '; /output is open to every user (the agent is not root, so it cannot give it away)'}`);
      const state: JobState = {
        spec,
        containerId: container.id,
        imageReference: image.reference,
        imageDigest: image.digest,
        outputMount: output.kind,
        outputLimitBytes: output.limitBytes,
        startedAt: new Date(this.now()).toISOString(),
      };
      await writeJson(join(dir, 'state.json'), state);
      try {
        await container.start();
      } catch (err) {
        throw new RuntimeError('create_failed', `starting the container failed: ${(err as Error).message}`, { cause: err });
      }
      started = true;
      system(`container ${container.id.slice(0, 12)} started from ${image.reference}`);
      await this.deps.images?.used(image.imageId);
      return this.supervise({ state, container, log, fileAfter: null, sink, sinkAfter: opts.sinkAfter ?? null, exited });
    } finally {
      if (!started) {
        await log.close().catch(() => undefined);
        // Nothing of a start that failed stays: container, mount, folder (once mkfs is done).
        if (outputReady) await (outputReady as Promise<OutputMount>).catch(() => undefined);
        await this.removeContainer(name).catch(() => undefined);
        await removeEgress(this.deps.docker, this.deps.owner, spec.assignmentId).catch(() => undefined);
        await releaseOutputMount(dir).catch(() => undefined);
        await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      }
    }
  }

  /** The job's image on the machine; a pull is recorded in the image cache before anything runs from it. */
  private async pullImage(spec: AssignmentSpec, system: (line: string) => void, phase: SuperviseOptions['phase']): Promise<ResolvedImage> {
    const image = await ensureImage(this.deps.docker, spec.image, spec.imageDigest, system, () => phase?.('pulling'));
    if (image.pulled) await this.deps.images?.pulled(spec.assignmentId, imageRunName(spec.image, spec.imageDigest), image);
    phase?.('starting');
    return image;
  }

  /**
   * Supervises a container found after a restart: follows its lines after the last one in the
   * log file (and after `sinkAfter` for the sink), re-arms the runtime limit from its start and
   * reports its exit, at once when it already exited.
   */
  async resume(state: JobState, sink: LogSink, opts: SuperviseOptions = {}): Promise<JobHandle> {
    const dir = this.dirOf(state.spec.assignmentId);
    const { file: log, last } = await LogFile.open(join(dir, 'log.jsonl'), this.logKeepBytes);
    const container = this.deps.docker.getContainer(state.containerId);
    const info = await container.inspect();
    const exited = info.State.Running
      ? (container.wait() as Promise<WaitResult>)
      : Promise.resolve<WaitResult>({ StatusCode: info.State.ExitCode });
    exited.catch(() => undefined);
    const startedAt = info.State.StartedAt && !info.State.StartedAt.startsWith('0001') ? info.State.StartedAt : state.startedAt;
    return this.supervise({ state: { ...state, startedAt }, container, log, fileAfter: last, sink, sinkAfter: opts.sinkAfter ?? null, exited });
  }

  /** Supervises a started container with this runtime's Docker, owner, folder, grace and clock. */
  private supervise(job: Omit<ContainerSupervisorOptions, 'docker' | 'owner' | 'dir' | 'graceSeconds' | 'now'>): JobHandle {
    return new ContainerSupervisor({
      ...job,
      docker: this.deps.docker,
      owner: this.deps.owner,
      dir: this.dirOf(job.state.spec.assignmentId),
      graceSeconds: this.grace,
      now: this.now,
    }).run();
  }

  /**
   * The file to upload as the log artifact of an exited job (`logFile` of its handle): the log
   * itself, or its first and last `logKeepBytes` with a `system` line saying what was dropped.
   */
  async logArtifact(logFile: string): Promise<string> {
    return writeLogArtifact(logFile, this.logKeepBytes);
  }

  /** Stops and removes the container, unmounts /output and deletes the assignment's folder. */
  async release(assignmentId: string): Promise<void> {
    const state = await readJson<JobState>(join(this.dirOf(assignmentId), 'state.json'));
    const ids = new Set<string>();
    if (state) ids.add(state.containerId);
    for (const c of await this.listContainers()) if (c.Labels[LABEL_ASSIGNMENT] === assignmentId) ids.add(c.Id);
    for (const id of ids) await this.removeContainer(id);
    await removeEgress(this.deps.docker, this.deps.owner, assignmentId);
    await releaseOutputMount(this.dirOf(assignmentId));
    await rm(this.dirOf(assignmentId), { recursive: true, force: true });
  }

  /** Every job container of this owner, running or not (egress proxies are egress/network.ts's). */
  async listContainers(): Promise<Docker.ContainerInfo[]> {
    const all = await this.deps.docker.listContainers({ all: true, filters: ownerFilter(this.deps.owner) });
    return all.filter((c) => c.Labels[LABEL_EGRESS] === undefined);
  }

  async removeContainer(id: string): Promise<void> {
    try {
      await this.deps.docker.getContainer(id).remove({ force: true, v: true });
    } catch (err) {
      const code = (err as { statusCode?: number }).statusCode;
      if (code !== 404 && code !== 409) throw err;
    }
  }

  /** The state of an assignment started on this machine, or null. */
  async readState(assignmentId: string): Promise<JobState | null> {
    return readJson<JobState>(join(this.dirOf(assignmentId), 'state.json'));
  }

  async readExit(assignmentId: string): Promise<JobExit | null> {
    return readJson<JobExit>(join(this.dirOf(assignmentId), 'exit.json'));
  }
}
