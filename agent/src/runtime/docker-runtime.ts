import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { AssignmentSpec } from '@gpufarm/shared';
import { followEgressLog, JOB_DNS, LABEL_EGRESS, removeEgress, startEgress } from '../egress/network.js';
import { checkContainerConfig, ContainerConfigError, toContainerConfig, type MachineFacts } from './container-config.js';
import { jobIdsIn } from './container-files.js';
import { RuntimeError } from './errors.js';
import { ensureImage } from './image.js';
import { jobUser } from './job-user.js';
import { downloadInputs } from './inputs.js';
import { jobDir, readJson, writeJson, type JobExit, type JobState } from './job-state.js';
import { assignmentLabels, containerName, LABEL_ASSIGNMENT, ownerFilter } from './labels.js';
import { LogFile, LOG_KEEP_BYTES, writeLogArtifact } from './log-file.js';
import { compareCursors, DockerLogParser, formatCursor, linesAfter, parseCursor, sinceSeconds, splitLong, timestampMs, type LogCursor, type LogSink, type RuntimeLogLine } from './log-lines.js';
import { giveOutputTo, prepareOutputMount, releaseOutputMount, treeBytes, WATCHDOG_INTERVAL_MS, type OutputMount } from './output-mount.js';

/** The values of settled promises, or the first rejection's reason thrown. */
function settled<T extends readonly unknown[]>(results: { [K in keyof T]: PromiseSettledResult<T[K]> }): T {
  const failed = (results as readonly PromiseSettledResult<unknown>[]).find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return (results as readonly PromiseSettledResult<unknown>[]).map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Seconds between SIGTERM and SIGKILL when a job is stopped (timeout, cancel). */
export const STOP_GRACE_SECONDS = 10;

/** What the runtime needs; wired once in the agent's main.ts (STYLE.md rule 2). */
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
  clock?: () => number;
}

/** A job the runtime supervises: started now, or found again after a restart. */
export interface JobHandle {
  assignmentId: string;
  spec: AssignmentSpec;
  containerId: string;
  imageDigest: string;
  startedAt: string;
  /** Host folder of /output, read by the packer once the job exited. */
  outputDir: string;
  /** The log artifact (`log.jsonl`); complete once `done` resolved. */
  logFile: string;
  /** Settles when the container exited and every line reached the sink and the log file. */
  done: Promise<JobExit>;
  /**
   * Stops the job (SIGTERM, grace, SIGKILL); `done` reports `canceled`. `note` is the `system`
   * line saying why (default: canceled).
   */
  cancel(note?: string): Promise<void>;
  /**
   * Stops supervising without touching the container (the agent shuts down and leaves the job
   * running for the next agent to restore): `done` rejects with `DetachedError`.
   */
  detach(): Promise<void>;
}

/** `done` of a job the agent stopped supervising (see `JobHandle.detach`). */
export class DetachedError extends Error {
  constructor(assignmentId: string) {
    super(`stopped supervising ${assignmentId}`);
    this.name = 'DetachedError';
  }
}

/** Options of `start` and `resume`. */
export interface SuperviseOptions {
  /** Lines up to this cursor's line in Docker's order (from the link's spool) are not sent to the sink again. */
  sinkAfter?: string | null;
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
    const system = (line: string) => {
      const entry: RuntimeLogLine = { stream: 'system', line, ts: this.now(), cursor: null };
      log.append(entry);
      sink(entry);
    };
    let started = false;
    let outputReady: Promise<OutputMount> | null = null;
    try {
      // The pull, the downloads and mkfs overlap; the container is created while /output is
      // still being mounted (a bind mount resolves its source at start, not at create).
      await mkdir(join(dir, 'output'), { recursive: true });
      outputReady = prepareOutputMount(dir, spec.outputRules, { allowLoop: this.deps.allowLoopMounts });
      outputReady.catch(() => undefined);
      const [image, inputs] = settled(
        await Promise.allSettled([ensureImage(this.deps.docker, spec.image, spec.imageDigest, system), downloadInputs(spec.inputs, join(dir, 'inputs'), system, this.deps.inputHeaders)]),
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
        ...(network ? { network: { name: network.network, env: network.env, dns: JOB_DNS } } : {}),
      });
      let container: Docker.Container;
      try {
        container = await this.deps.docker.createContainer(config);
      } catch (err) {
        throw new RuntimeError('create_failed', `creating the container failed: ${(err as Error).message}`, { cause: err });
      }
      // dockerode: wait() before start() returns at once; 'next-exit' waits for this run's exit.
      // Sent as early as possible so dockerd has it before the start (supervise also watches
      // for the end of the logs, should the wait miss a very short run).
      const exited = container.wait({ condition: 'next-exit' }) as Promise<{ StatusCode: number }>;
      exited.catch(() => undefined);
      // The ids of the image's USER, for /output: Docker resolves the same name at start.
      const user = jobUser(image.user);
      const [output, ids] = settled(await Promise.allSettled([outputReady, jobIdsIn(container, user)]));
      system(output.kind === 'loop'
        ? `/output is a ${output.limitBytes}-byte filesystem (loop-mounted ext4): writes past it fail`
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
      return this.supervise(state, container, log, null, sink, opts, exited);
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
      ? (container.wait() as Promise<{ StatusCode: number }>)
      : Promise.resolve({ StatusCode: info.State.ExitCode });
    exited.catch(() => undefined);
    const startedAt = info.State.StartedAt && !info.State.StartedAt.startsWith('0001') ? info.State.StartedAt : state.startedAt;
    return this.supervise({ ...state, startedAt }, container, log, last, sink, opts, exited);
  }

  private supervise(
    state: JobState,
    container: Docker.Container,
    log: LogFile,
    fileAfter: LogCursor | null,
    sink: LogSink,
    opts: SuperviseOptions,
    exited: Promise<{ StatusCode: number }>,
  ): JobHandle {
    const { spec } = state;
    const dir = this.dirOf(spec.assignmentId);
    const sinkAfter = opts.sinkAfter ? parseCursor(opts.sinkAfter) : fileAfter;
    // The follower starts after the sink's cursor: the spool holds a prefix of the file's lines
    // (each goes to the file first), so in Docker's order it is never after the file's; with no
    // file cursor it starts at the beginning. A target whose cursor is not where the follower
    // starts skips on to its own (by place in Docker's order, see `linesAfter`).
    const resumeAt = fileAfter === null ? null : sinkAfter;
    const skipTo = (after: LogCursor | null) => linesAfter(after && resumeAt && compareCursors(after, resumeAt) === 0 ? null : after);
    const toFile = skipTo(fileAfter);
    const toSink = skipTo(sinkAfter);
    const system = (line: string) => {
      const entry: RuntimeLogLine = { stream: 'system', line, ts: this.now(), cursor: null };
      log.append(entry);
      sink(entry);
    };
    // The proxy's decisions become the job's system lines; proxy and network go when it ends.
    const egress = spec.networkPolicy.mode === 'allowlist' ? followEgressLog(this.deps.docker, { owner: this.deps.owner, assignmentId: spec.assignmentId, dir }, system) : null;
    let stopCause: 'timeout' | 'cancel' | 'watchdog' | null = null;
    const stop = async (cause: 'timeout' | 'cancel' | 'watchdog', graceSeconds: number) => {
      if (stopCause) return;
      stopCause = cause;
      try {
        await container.stop({ t: graceSeconds });
      } catch (err) {
        const code = (err as { statusCode?: number }).statusCode;
        if (code !== 304 && code !== 404) system(`stopping the container failed: ${(err as Error).message}`);
      }
    };

    const elapsed = this.now() - Date.parse(state.startedAt);
    const remaining = Math.max(0, spec.maxRuntimeSeconds * 1000 - elapsed);
    const timer = setTimeout(() => {
      system(`maxRuntimeSeconds (${spec.maxRuntimeSeconds}) reached: stopping (SIGTERM, then SIGKILL after ${this.grace} s)`);
      void stop('timeout', this.grace);
    }, remaining);
    let watchdog: NodeJS.Timeout | null = null;
    if (state.outputMount === 'watchdog') {
      let measuring = false;
      watchdog = setInterval(() => {
        if (measuring) return;
        measuring = true;
        void treeBytes(join(dir, 'output')).then((bytes) => {
          measuring = false;
          if (bytes > state.outputLimitBytes && !stopCause) {
            system(`/output holds ${bytes} bytes, more than the ${state.outputLimitBytes} allowed: stopping the job`);
            void stop('watchdog', 0);
          }
        });
      }, WATCHDOG_INTERVAL_MS);
    }

    let detached = false;
    const deliver = (line: RuntimeLogLine) => {
      if (detached) return;
      const cursor = line.cursor ? parseCursor(line.cursor) : null;
      if (!cursor || toFile(cursor)) log.append(line);
      if (!cursor || toSink(cursor)) sink(line);
    };
    let logStream: NodeJS.ReadableStream | null = null;
    const logsDone = this.follow(container, resumeAt, (s) => {
      logStream = s;
      if (detached) (s as unknown as { destroy: () => void }).destroy();
    }, (line) => deliver(line));

    let detachNow!: () => void;
    const detachSignal = new Promise<never>((_, reject) => (detachNow = () => reject(new DetachedError(spec.assignmentId))));
    detachSignal.catch(() => undefined);
    // The follower ends when the container stops: then Docker's state has the exit code even
    // if the wait request missed the exit.
    const stoppedAfterLogs = async (): Promise<{ StatusCode: number }> => {
      await logsDone.catch(() => undefined);
      for (;;) {
        if (detached) return new Promise<never>(() => undefined);
        const info = await container.inspect().catch(() => null);
        if (info && !info.State.Running) return { StatusCode: info.State.ExitCode };
        await new Promise((r) => setTimeout(r, 500));
      }
    };
    const done = (async (): Promise<JobExit> => {
      let exitCode: number | null = null;
      try {
        exitCode = (await Promise.race([exited, stoppedAfterLogs(), detachSignal])).StatusCode;
      } catch (err) {
        if (err instanceof DetachedError) {
          clearTimeout(timer);
          if (watchdog) clearInterval(watchdog);
          await egress?.detach();
          throw err;
        }
        system(`waiting for the container failed: ${(err as Error).message}`);
      }
      clearTimeout(timer);
      if (watchdog) clearInterval(watchdog);
      if (detached) throw new DetachedError(spec.assignmentId);
      const lastLine = await logsDone.catch((err: unknown) => {
        system(`reading the container's logs failed: ${(err as Error).message}`);
        return resumeAt;
      });
      await this.catchUp(container, lastLine, deliver).catch(() => undefined);
      let info: Docker.ContainerInspectInfo | null = null;
      try {
        info = await container.inspect();
      } catch {
        // Removed behind our back: the wait's status is all there is.
      }
      if (detached) throw new DetachedError(spec.assignmentId);
      if (egress) await egress.finish().catch((err: unknown) => system(`removing the egress proxy failed: ${(err as Error).message}`));
      if (info) exitCode = info.State.ExitCode;
      const oomKilled = Boolean(info?.State.OOMKilled) || (exitCode === 137 && stopCause === null);
      const finishedAt = info?.State.FinishedAt && !info.State.FinishedAt.startsWith('0001') ? info.State.FinishedAt : new Date(this.now()).toISOString();
      const exit: JobExit = {
        assignmentId: spec.assignmentId,
        exitCode,
        oomKilled,
        timedOut: stopCause === 'timeout',
        canceled: stopCause === 'cancel',
        outputLimitExceeded: stopCause === 'watchdog',
        startedAt: state.startedAt,
        finishedAt,
        imageDigest: state.imageDigest,
      };
      system(`exited with code ${exitCode}${oomKilled ? ' (out of memory)' : ''}${exit.timedOut ? ' (stopped at maxRuntimeSeconds)' : ''}${exit.canceled ? ' (canceled)' : ''}${exit.outputLimitExceeded ? ' (output limit exceeded)' : ''}`);
      await log.close();
      await writeJson(join(dir, 'exit.json'), exit);
      return exit;
    })();

    // A detached job's `done` rejects whether or not anyone awaits it.
    done.catch(() => undefined);
    return {
      assignmentId: spec.assignmentId,
      spec,
      containerId: state.containerId,
      imageDigest: state.imageDigest,
      startedAt: state.startedAt,
      outputDir: join(dir, 'output'),
      logFile: join(dir, 'log.jsonl'),
      done,
      cancel: async (note?: string) => {
        system(note ?? 'canceled: stopping (SIGTERM, then SIGKILL after the grace period)');
        await stop('cancel', this.grace);
      },
      detach: async () => {
        if (detached) return;
        detached = true;
        detachNow();
        (logStream as unknown as { destroy?: () => void } | null)?.destroy?.();
        await egress?.detach();
        await logsDone.catch(() => undefined);
        await log.close().catch(() => undefined);
      },
    };
  }

  /**
   * Follows the container's log (after `after`) until it exits; resolves with the cursor of the
   * last line emitted once the stream ended.
   */
  private async follow(
    container: Docker.Container,
    after: LogCursor | null,
    opened: (stream: NodeJS.ReadableStream) => void,
    emit: (line: RuntimeLogLine) => void,
  ): Promise<LogCursor | null> {
    const stream = (await container.logs({
      follow: true,
      stdout: true,
      stderr: true,
      timestamps: true,
      ...(after ? { since: sinceSeconds(after) } : {}),
    })) as unknown as NodeJS.ReadableStream;
    opened(stream);
    let last = after;
    const parser = this.parser(after, (line, cursor) => {
      last = cursor;
      emit(line);
    });
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (chunk: Buffer) => parser.push(chunk));
      stream.on('end', () => {
        parser.end();
        resolve();
      });
      stream.on('error', reject);
      // A destroyed stream (detach) closes without 'end'.
      stream.on('close', () => resolve());
    });
    return last;
  }

  /**
   * Reads, once, the lines after `after` of a stopped container: a follower can end a moment
   * before Docker stored the last lines (a final line without newline especially).
   */
  private async catchUp(container: Docker.Container, after: LogCursor | null, emit: (line: RuntimeLogLine) => void): Promise<void> {
    const bytes = (await container.logs({ follow: false, stdout: true, stderr: true, timestamps: true, ...(after ? { since: sinceSeconds(after) } : {}) })) as unknown as Buffer;
    const parser = this.parser(after, (line) => emit(line));
    parser.push(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
    parser.end();
  }

  private parser(after: LogCursor | null, emit: (line: RuntimeLogLine, cursor: LogCursor) => void): DockerLogParser {
    return new DockerLogParser((stream, text, cursor) => {
      const ts = timestampMs(cursor.ts);
      // Every piece of a long line carries the line's cursor: a resume drops all of them or none.
      for (const line of splitLong(text)) emit({ stream, line, ts, cursor: formatCursor(cursor) }, cursor);
    }, after);
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
