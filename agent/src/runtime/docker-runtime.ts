import { join } from 'node:path';
import type Docker from 'dockerode';
import type { AssignmentSpec } from '@gpufarm/shared';
import { ownContainers, removeContainer } from '../docker/containers.js';
import { containerName } from '../docker/labels.js';
import type { LogSink } from '../docker/log-lines.js';
import { jobDir, readJson, type JobExit, type JobState } from '../job/state.js';
import { checkContainerConfig, ContainerConfigError } from './container-config.js';
import { ContainerSupervisor, type ContainerSupervisorOptions, type JobHandle, type WaitResult } from './container-supervisor.js';
import { STOP_GRACE_SECONDS, type RuntimeDeps, type SuperviseOptions } from './deps.js';
import { jobHooks, need, runPoststops, runPreruns, type HookStep, type JobRef, type JobSetup } from './hooks/index.js';
import { LogFile, LOG_KEEP_BYTES, writeLogArtifact } from './log-file.js';

export { DetachedError } from '../job/errors.js';
export type { JobHandle } from './container-supervisor.js';
export { STOP_GRACE_SECONDS, type ImagePullObserver, type RuntimeDeps } from './deps.js';

/**
 * The container runtime through Docker Engine. `start` runs the job's hooks (`hooks/`: folder,
 * log, /output, image and inputs, egress, container, user, start) and returns once the container
 * runs; its lines flow to the sink until it exits. `resume` supervises a container found after a
 * restart (see `restore/`). `release` runs the hooks' cleanups (container, egress, mount, folder)
 * once results are uploaded.
 */
export class DockerRuntime {
  private readonly now: () => number;
  private readonly grace: number;
  private readonly logKeepBytes: number;
  /** A start's steps, each with its cleanup (`hooks/`). */
  private readonly hooks: readonly HookStep[];

  constructor(readonly deps: RuntimeDeps) {
    this.now = deps.clock ?? Date.now;
    this.grace = deps.stopGraceSeconds ?? STOP_GRACE_SECONDS;
    this.logKeepBytes = deps.logKeepBytes ?? LOG_KEEP_BYTES;
    this.hooks = jobHooks(deps, { now: this.now, logKeepBytes: this.logKeepBytes });
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
    // Refuse a request the machine cannot honour before pulling anything.
    checkContainerConfig(spec, this.deps.machine);
    // The hooks run in order; a step that fails undoes itself and the ones before it: nothing
    // of a start that failed stays (container, network, mount, folder).
    const job: JobSetup = { ...this.refOf(spec.assignmentId), spec, sink, ...(opts.phase ? { phase: opts.phase } : {}) };
    await runPreruns(this.hooks, job);
    const image = need(job.image, 'image');
    const container = need(job.container, 'container');
    need(job.system, 'system')(`container ${container.id.slice(0, 12)} started from ${image.reference}`);
    await this.deps.images?.used(image.imageId);
    return this.supervise({ state: need(job.state, 'state'), container, log: need(job.log, 'log'), fileAfter: null, sink, sinkAfter: opts.sinkAfter ?? null, exited: need(job.exited, 'exited') });
  }

  /** What the hooks know of an assignment without its start: its id, folder and container name. */
  private refOf(assignmentId: string): JobRef {
    return { assignmentId, dir: this.dirOf(assignmentId), name: containerName(this.deps.owner, assignmentId) };
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

  /**
   * Stops and removes the container, the egress network and proxy, unmounts /output and deletes
   * the assignment's folder: every hook's cleanup, last step first. Also for an assignment this
   * agent did not start (`restore/`): whatever of it exists goes.
   */
  async release(assignmentId: string): Promise<void> {
    await runPoststops(this.hooks, this.refOf(assignmentId));
  }

  /** Every job container of this owner, running or not (egress proxies are egress/network.ts's). */
  async listContainers(): Promise<Docker.ContainerInfo[]> {
    return ownContainers(this.deps.docker, this.deps.owner);
  }

  async removeContainer(id: string): Promise<void> {
    await removeContainer(this.deps.docker, id);
  }

  /** The state of an assignment started on this machine, or null. */
  async readState(assignmentId: string): Promise<JobState | null> {
    return readJson<JobState>(join(this.dirOf(assignmentId), 'state.json'));
  }

  async readExit(assignmentId: string): Promise<JobExit | null> {
    return readJson<JobExit>(join(this.dirOf(assignmentId), 'exit.json'));
  }
}
