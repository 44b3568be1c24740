import { readFileSync } from 'node:fs';
import type { KeyObject } from 'node:crypto';
import { errorText, MAX_LOG_LINE_CHARS, type AssignmentSpec, type RunningAssignment } from '@gpufarm/shared';
import type { AcceptResult, AssignmentContext, AssignmentReport, AssignmentRunner } from '../link/assignment-runner.js';
import type { ArtifactSources } from '../artifacts/off-thread.js';
import { collectResults, type CollectedResults } from '../artifacts/results.js';
import { UploadError } from '../artifacts/upload.js';
import { restoreJobs } from '../restore/restore.js';
import { checkContainerConfig, ContainerConfigError } from '../runtime/container-config.js';
import { DetachedError, type DockerRuntime, type JobHandle } from '../runtime/docker-runtime.js';
import { RuntimeError, type RuntimeFailureCode } from '../job/errors.js';
import { imageRunName } from '../docker/image.js';
import type { GpuJob } from '../runtime/gpu-access.js';
import type { JobExit } from '../job/state.js';
import { replayFiles } from '../runtime/log-file.js';
import type { LogSink } from '../docker/log-lines.js';
import { jobFields, silentLog, type AgentLog } from '../logger/logger.js';

export interface DockerRunnerOptions {
  runtime: DockerRuntime;
  /** The upload URL of an artifact (`<server>/agent/v1/assignments/:id/outputs/:name`). */
  uploadUrl: (assignmentId: string, name: string) => string;
  /** Headers of every upload (the machine token). */
  uploadHeaders: () => Record<string, string>;
  /** The machine's ed25519 key, which signs execution records. */
  machineKey: KeyObject | string;
  /** Where artifacts are read, packed and hashed for upload (default: this thread). */
  artifacts?: ArtifactSources;
  /** Refuses new work while draining or unhealthy; null accepts. */
  admission?: (spec: AssignmentSpec) => AcceptResult | null;
  /**
   * The image cache (`image-cache/`): makes room for the job's image before it is accepted, or
   * says why it cannot (`image_cache_full`); the room is held until the start ends.
   */
  images?: {
    admit(holder: string, reference: string): Promise<{ admitted: true } | { admitted: false; message: string }>;
    release(holder: string): void;
  };
  /** The daemon's log; each job's lines go to a child with its `jobId` and `assignmentId`. */
  log?: AgentLog;
}

const NULL_REPORT: AssignmentReport = {
  state: 'pulling',
  imageDigest: null,
  startedAt: null,
  finishedAt: null,
  exitCode: null,
  oomKilled: null,
  timedOut: null,
  failure: null,
  outputs: null,
  record: null,
  lastLogSeq: null,
};

interface Held {
  spec: AssignmentSpec;
  ctx: AssignmentContext;
  state: RunningAssignment['state'];
  handle: JobHandle | null;
  /** Stopped because the control plane could not be reached (once). */
  stoppedForContact: boolean;
  /** A cancel arrived (possibly before the container started: it is stopped as soon as it runs). */
  canceled: boolean;
  /** The machine failed the job (`failForMachine`): once stopped it is reported failed with this, not finished. */
  machineFault?: { code: RuntimeFailureCode; message: string };
}


/**
 * The `AssignmentRunner` port of the daemon (`link/assignment-runner.ts`) on the Docker runtime:
 * accept checks the request against the machine and GPUs in use, then the job runs in the
 * background: pull, start, supervise, and once it exited, pack and upload the outputs and the
 * log, sign the execution record and report `finished` (or `failed` with the runtime's code).
 *
 * Log numbering across restarts: the runtime's `log.jsonl` holds, line for line, what the sink
 * was given, so after a restart the sink is opened at seq 0 and the file is replayed into it
 * (the same seqs with the same text; the server stores each (assignment, seq) once and the
 * shipper sends only what the server lacks), then live lines continue after the file's last one.
 * A log cut in the middle (`LogFile`) is replayed from its first kept tail line, at that line's seq.
 */
export class DockerAssignmentRunner implements AssignmentRunner {
  private readonly held = new Map<string, Held>();
  private partitioned = false;
  private lost: { seconds: number } | null = null;
  private linkBack: Array<() => void> = [];
  private readonly log: AgentLog;

  constructor(private readonly options: DockerRunnerOptions) {
    this.log = options.log ?? silentLog;
  }

  private jobLog(spec: AssignmentSpec): AgentLog {
    return this.log.child(jobFields(spec));
  }

  async accept(spec: AssignmentSpec, ctx: AssignmentContext): Promise<AcceptResult> {
    if (this.held.has(spec.assignmentId) || (await this.options.runtime.readState(spec.assignmentId))) {
      return { accepted: false, reason: 'duplicate', message: `assignment ${spec.assignmentId} is already on this machine` };
    }
    const refused = this.options.admission?.(spec);
    if (refused) return refused;
    try {
      checkContainerConfig(spec, this.options.runtime.deps.machine);
    } catch (err) {
      if (!(err instanceof ContainerConfigError)) throw err;
      return { accepted: false, reason: err.code === 'unsupported' ? 'unsupported' : err.code === 'duplicate' ? 'duplicate' : 'invalid', message: err.message };
    }
    const busy = new Set([...this.held.values()].flatMap((h) => h.spec.gpus.map((g) => g.uuid)));
    const taken = spec.gpus.filter((g) => busy.has(g.uuid));
    if (taken.length > 0) return { accepted: false, reason: 'gpus_unavailable', message: `GPUs ${taken.map((g) => g.index).join(', ')} run another assignment` };

    const held: Held = { spec, ctx, state: 'running', handle: null, stoppedForContact: false, canceled: false };
    // Held before the image check, which waits on the registry: its GPUs are taken meanwhile.
    this.held.set(spec.assignmentId, held);
    let room: Awaited<ReturnType<NonNullable<DockerRunnerOptions['images']>['admit']>> | undefined;
    try {
      room = await this.options.images?.admit(spec.assignmentId, imageRunName(spec.image, spec.imageDigest));
    } catch (err) {
      this.held.delete(spec.assignmentId);
      return { accepted: false, reason: 'not_ready', message: `the image cache could not check the image: ${errorText(err)}`.slice(0, 2000) };
    }
    if (room && !room.admitted) {
      this.held.delete(spec.assignmentId);
      return { accepted: false, reason: 'image_cache_full', message: room.message.slice(0, 2000) };
    }
    void this.run(held);
    return { accepted: true };
  }

  /** The images the held assignments run (the image cache never evicts them). */
  heldImages(): string[] {
    return [...this.held.values()].map((h) => imageRunName(h.spec.image, h.spec.imageDigest));
  }

  private async run(held: Held): Promise<void> {
    const { spec, ctx } = held;
    try {
      // `pulling` only when a pull begins, then `starting` with the image there: the control plane times the start's phases by them.
      held.handle = await this.options.runtime.start(spec, sinkOf(ctx.logs), { phase: (state) => ctx.report({ ...NULL_REPORT, state }) });
    } catch (err) {
      this.held.delete(spec.assignmentId);
      this.options.images?.release(spec.assignmentId);
      const code = err instanceof RuntimeError ? err.code : 'internal';
      ctx.report({ ...NULL_REPORT, state: 'failed', failure: { code, message: errorText(err).slice(0, 2000) }, lastLogSeq: lastSeq(ctx) });
      return;
    }
    this.options.images?.release(spec.assignmentId);
    ctx.report({ ...NULL_REPORT, state: 'running', imageDigest: held.handle.imageDigest, startedAt: held.handle.startedAt });
    if (held.canceled) void held.handle.cancel();
    if (this.lost) this.stopForContact(held);
    await this.finish(held, held.handle);
  }

  /** Waits for the exit, then uploads and reports; a detached job is left to the next agent. */
  private async finish(held: Held, handle: JobHandle): Promise<void> {
    let exit: JobExit;
    try {
      exit = await handle.done;
    } catch (err) {
      if (err instanceof DetachedError) return;
      // Nothing to upload without the exit facts; the container stays for a restart to find.
      this.held.delete(held.spec.assignmentId);
      held.ctx.report({ ...NULL_REPORT, state: 'failed', failure: { code: 'internal', message: `supervising the container failed: ${errorText(err)}`.slice(0, 2000) }, lastLogSeq: lastSeq(held.ctx) });
      return;
    }
    if (held.machineFault) {
      // The run is not the job's result: no outputs go up, the control plane retries it elsewhere.
      this.held.delete(held.spec.assignmentId);
      held.ctx.report({ ...NULL_REPORT, imageDigest: exit.imageDigest, startedAt: exit.startedAt, finishedAt: exit.finishedAt, exitCode: exit.exitCode, state: 'failed', failure: held.machineFault, lastLogSeq: lastSeq(held.ctx) });
      await held.ctx.logs.drained();
      await this.options.runtime.release(held.spec.assignmentId).catch((e: unknown) => this.jobLog(held.spec).warn(`releasing ${held.spec.assignmentId} failed: ${errorText(e)}`));
      return;
    }
    await this.complete(held, exit, handle.outputDir, handle.logFile);
  }

  /** The running jobs that hold GPUs, with their containers (for `runtime/gpu-access.ts`). */
  gpuJobs(): GpuJob[] {
    return [...this.held.values()]
      .filter((h) => h.state === 'running' && h.handle !== null && h.spec.gpus.length > 0 && !h.machineFault && !h.canceled && !h.stoppedForContact)
      .map((h) => ({ assignmentId: h.spec.assignmentId, jobId: h.spec.jobId, containerId: h.handle!.containerId, gpuUuids: h.spec.gpus.map((g) => g.uuid) }));
  }

  /**
   * Stops a running job for a fault of the machine (its container lost its GPUs): the job's log
   * says why, and once the container stopped the assignment is reported `failed` with `fault`
   * (retried on another machine, not charged) instead of finished; nothing is uploaded. False
   * when the assignment is not running here (finished, or already stopped).
   */
  async failForMachine(assignmentId: string, fault: { code: RuntimeFailureCode; message: string }): Promise<boolean> {
    const held = this.held.get(assignmentId);
    if (!held || held.state !== 'running' || !held.handle || held.machineFault) return false;
    held.machineFault = { code: fault.code, message: fault.message.slice(0, 2000) };
    this.jobLog(held.spec).error(`assignment ${assignmentId}: failed by the machine: ${fault.message}`);
    await held.handle.cancel(`stopped by the machine: ${fault.message}`);
    return true;
  }

  private async complete(held: Held, exit: JobExit, outputDir: string, logFile: string): Promise<void> {
    const { spec, ctx } = held;
    const exitFacts = { imageDigest: exit.imageDigest, startedAt: exit.startedAt, finishedAt: exit.finishedAt, exitCode: exit.exitCode, oomKilled: exit.oomKilled, timedOut: exit.timedOut };
    held.state = 'exited';
    ctx.report({ ...NULL_REPORT, ...exitFacts, state: 'exited', lastLogSeq: lastSeq(ctx) });
    let results: CollectedResults | null = null;
    let failure: string | null = null;
    while (results === null && failure === null) {
      // Outputs wait for the link: uploads go to the control plane.
      while (this.partitioned) await new Promise<void>((resolve) => this.linkBack.push(resolve));
      if (held.state !== 'uploading') {
        held.state = 'uploading';
        ctx.report({ ...NULL_REPORT, ...exitFacts, state: 'uploading', lastLogSeq: lastSeq(ctx) });
      }
      try {
        results = await collectResults({
          spec,
          exit,
          outputDir,
          logFile: await this.options.runtime.logArtifact(logFile),
          urlFor: (name) => this.options.uploadUrl(spec.assignmentId, name),
          // The control plane says whether the bytes go to it or straight to its object store.
          askPlan: true,
          headers: this.options.uploadHeaders(),
          machineKey: this.options.machineKey,
          ...(this.options.artifacts ? { sources: this.options.artifacts } : {}),
          log: this.jobLog(spec),
        });
      } catch (err) {
        // The link went down while uploading: the outputs are kept and go up once it is back.
        if (err instanceof UploadError && err.retryable && this.partitioned) this.jobLog(spec).warn(`assignment ${spec.assignmentId}: upload interrupted (${err.message}); again once the control plane is back`);
        else failure = errorText(err);
      }
    }
    this.held.delete(spec.assignmentId);
    if (results) {
      ctx.report({
        ...NULL_REPORT,
        ...exitFacts,
        state: 'finished',
        outputs: results.outputs.filter((o) => o.sha256 !== null).map((o) => ({ path: o.path, name: o.name, sha256: o.sha256!, sizeBytes: o.sizeBytes! })),
        // What the job's own files cost it (an output not stored, entries left out): the job completes.
        ...(results.notes.length > 0 ? { outputNotes: results.notes } : {}),
        log: results.log,
        record: results.signed,
        lastLogSeq: lastSeq(ctx),
      });
    } else {
      ctx.report({ ...NULL_REPORT, ...exitFacts, state: 'failed', failure: { code: 'upload_failed', message: (failure ?? 'upload failed').slice(0, 2000) }, lastLogSeq: lastSeq(ctx) });
    }
    // The folder (log file, outputs, state) goes once the server has every line: an agent
    // killed before that restores the job from it, uploads again and reports again.
    await ctx.logs.drained();
    await this.options.runtime.release(spec.assignmentId).catch((err: unknown) => this.jobLog(spec).warn(`releasing ${spec.assignmentId} failed: ${errorText(err)}`));
  }

  async cancel(assignmentId: string, reason: string): Promise<void> {
    const held = this.held.get(assignmentId);
    if (!held) return;
    this.jobLog(held.spec).info(`cancel ${assignmentId}: ${reason}`);
    held.canceled = true;
    await held.handle?.cancel();
  }

  async running(): Promise<RunningAssignment[]> {
    return [...this.held.values()].map((h) => ({ assignmentId: h.spec.assignmentId, jobId: h.spec.jobId, state: h.state, nextLogSeq: h.ctx.logs.nextSeq }));
  }

  async restore(open: (assignmentId: string, firstSeq: number) => AssignmentContext): Promise<void> {
    const contexts = new Map<string, AssignmentContext>();
    const openReplayed = (spec: AssignmentSpec, logFile: string) => {
      const files = replayFiles(logFile);
      const ctx = open(spec.assignmentId, files[0]!.firstSeq);
      for (const file of files) replay(file.path, ctx.logs);
      contexts.set(spec.assignmentId, ctx);
      return ctx;
    };
    const found = await restoreJobs(this.options.runtime, {
      sinkFor: (spec) => sinkOf(openReplayed(spec, `${this.options.runtime.dirOf(spec.assignmentId)}/log.jsonl`).logs),
    });
    for (const id of found.removed) this.log.info({ containerId: id }, `removed container ${id.slice(0, 12)}: no assignment owns it`);
    for (const handle of found.jobs) {
      const held: Held = { spec: handle.spec, ctx: contexts.get(handle.assignmentId)!, state: 'running', handle, stoppedForContact: false, canceled: false };
      this.held.set(handle.assignmentId, held);
      void this.finish(held, handle);
    }
    for (const job of found.finished) {
      const ctx = openReplayed(job.spec, job.logFile);
      const held: Held = { spec: job.spec, ctx, state: 'exited', handle: null, stoppedForContact: false, canceled: false };
      this.held.set(job.spec.assignmentId, held);
      void this.complete(held, job.exit, job.outputDir, job.logFile);
    }
    for (const spec of found.lost) {
      const ctx = open(spec.assignmentId, 0);
      ctx.report({ ...NULL_REPORT, state: 'failed', failure: { code: 'lost', message: 'the container was gone when the agent restarted' } });
      await this.options.runtime.release(spec.assignmentId);
    }
  }

  setPartitioned(partitioned: boolean): void {
    this.partitioned = partitioned;
    if (!partitioned) for (const resolve of this.linkBack.splice(0)) resolve();
  }

  contactLost(lost: { seconds: number } | null): void {
    this.lost = lost;
    if (lost) for (const held of this.held.values()) if (held.state === 'running') this.stopForContact(held);
  }

  /** Stops a running job the control plane may give to another machine; a job still pulling is stopped once it runs. */
  private stopForContact(held: Held): void {
    if (held.stoppedForContact || !held.handle || !this.lost) return;
    held.stoppedForContact = true;
    const { seconds } = this.lost;
    this.jobLog(held.spec).warn(`assignment ${held.spec.assignmentId}: control plane unreachable for ${seconds} s, stopping it (outputs kept for upload)`);
    void held.handle.cancel(
      `the control plane was unreachable for ${seconds} s (the partition grace): stopping before it can give the job to another machine (SIGTERM, then SIGKILL after the grace period); the outputs are kept for upload`,
    );
  }

  async close(): Promise<void> {
    for (const held of this.held.values()) await held.handle?.detach();
    this.held.clear();
  }
}

/** One runtime line is one seq (a longer system line is cut, never split), so line k of the log file stays seq k. */
function sinkOf(logs: AssignmentContext['logs']): LogSink {
  return (l) => void logs.write(l.stream, l.line.length > MAX_LOG_LINE_CHARS ? l.line.slice(0, MAX_LOG_LINE_CHARS) : l.line, l.ts);
}

function lastSeq(ctx: AssignmentContext): number | null {
  return ctx.logs.nextSeq > 0 ? ctx.logs.nextSeq - 1 : null;
}

/** Writes the lines of a runtime log file to a sink opened at its first line's seq: each line gets its seq again. */
function replay(logFile: string, logs: AssignmentContext['logs']): void {
  let text: string;
  try {
    text = readFileSync(logFile, 'utf8');
  } catch {
    return;
  }
  for (const raw of text.split('\n')) {
    if (raw === '') continue;
    try {
      const l = JSON.parse(raw) as { ts: number; stream: 'stdout' | 'stderr' | 'system'; line: string };
      logs.write(l.stream, l.line.length > MAX_LOG_LINE_CHARS ? l.line.slice(0, MAX_LOG_LINE_CHARS) : l.line, l.ts);
    } catch {
      // A torn last line: the runtime's log file drops it when it reopens, and the line comes again.
    }
  }
}
