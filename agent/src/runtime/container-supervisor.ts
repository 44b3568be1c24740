import { join } from 'node:path';
import type Docker from 'dockerode';
import type { AssignmentSpec } from '@gpufarm/shared';
import { followEgressLog, type EgressLogFollower } from '../egress/network.js';
import { DetachedError } from '../job/errors.js';
import { writeJson, type JobExit, type JobState } from '../job/state.js';
import type { LogFile } from './log-file.js';
import { compareCursors, DockerLogParser, formatCursor, linesAfter, parseCursor, sinceSeconds, splitLong, timestampMs, type LogCursor, type LogSink, type RuntimeLogLine } from '../docker/log-lines.js';
import { treeBytes, WATCHDOG_INTERVAL_MS } from './output-mount.js';
import { errorText } from '@gpufarm/shared';

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

/** Why the agent stopped a container; null while it runs on its own. */
export type StopCause = 'timeout' | 'cancel' | 'watchdog';

/** What Docker's wait reports for a container that exited. */
export interface WaitResult {
  StatusCode: number;
}

/** Everything one supervised container needs; see `ContainerSupervisor`. */
export interface ContainerSupervisorOptions {
  /** Reaches the egress proxy of an allowlist job. */
  docker: Docker;
  /** The agent's owner label; the egress proxy is found by it. */
  owner: string;
  /** The assignment's folder (`jobDir`): `output/`, `exit.json`, the egress cursor. */
  dir: string;
  state: JobState;
  container: Docker.Container;
  /** The job's log file, open for appending; closed once the job exited or was detached. */
  log: LogFile;
  /** The cursor of the log file's last container line (a resumed job), or null. */
  fileAfter: LogCursor | null;
  sink: LogSink;
  /** Lines up to this cursor's line in Docker's order (from the link's spool) are not sent to the sink again. */
  sinkAfter?: string | null;
  /** Docker's wait for this run's exit, requested before the container started where possible. */
  exited: Promise<WaitResult>;
  /** Seconds between SIGTERM and SIGKILL for a timeout or a cancel. */
  graceSeconds: number;
  now: () => number;
}

/** Milliseconds a job has left before `maxRuntimeSeconds`, counted from its start (0 when past). */
export function remainingRuntimeMs(state: Pick<JobState, 'spec' | 'startedAt'>, now: number): number {
  return Math.max(0, state.spec.maxRuntimeSeconds * 1000 - (now - Date.parse(state.startedAt)));
}

/** Which lines of a follower go to the log file and which to the sink, and where the follower starts. */
export interface LogRoutes {
  /** Where the follower starts: null for the container's first line. */
  resumeAt: LogCursor | null;
  /** Admits the lines the log file lacks (called once per line, in Docker's order). */
  toFile: (cursor: LogCursor) => boolean;
  /** Admits the lines the sink lacks (called once per line, in Docker's order). */
  toSink: (cursor: LogCursor) => boolean;
}

/**
 * Routes a follower's lines after a restart. The follower starts after the sink's cursor: the
 * spool holds a prefix of the file's lines (each goes to the file first), so in Docker's order
 * it is never after the file's; with no file cursor it starts at the beginning. A target whose
 * cursor is not where the follower starts skips on to its own (by place in Docker's order, see
 * `linesAfter`).
 */
export function logRoutes(fileAfter: LogCursor | null, sinkAfter: LogCursor | null): LogRoutes {
  const resumeAt = fileAfter === null ? null : sinkAfter;
  const skipTo = (after: LogCursor | null) => linesAfter(after && resumeAt && compareCursors(after, resumeAt) === 0 ? null : after);
  return { resumeAt, toFile: skipTo(fileAfter), toSink: skipTo(sinkAfter) };
}

/** The facts of an exited container that make its exit record. */
export interface ExitFacts {
  state: Pick<JobState, 'spec' | 'startedAt' | 'imageDigest'>;
  /** Docker's exit code (inspect's when it answered, else the wait's), or null when neither said. */
  exitCode: number | null;
  /** The container's state once it exited; null when it was removed behind the agent's back. */
  info: Pick<Docker.ContainerInspectInfo['State'], 'OOMKilled' | 'FinishedAt'> | null;
  stopCause: StopCause | null;
  now: number;
}

/**
 * How a job ended. Exit 137 the agent did not cause counts as out of memory too: Docker's
 * `OOMKilled` can stay false when the OOM killer ends the container's first process.
 */
export function exitRecord(facts: ExitFacts): JobExit {
  const { state, exitCode, info, stopCause } = facts;
  const oomKilled = Boolean(info?.OOMKilled) || (exitCode === 137 && stopCause === null);
  // Docker's zero time means it never recorded a finish.
  const finishedAt = info?.FinishedAt && !info.FinishedAt.startsWith('0001') ? info.FinishedAt : new Date(facts.now).toISOString();
  return {
    assignmentId: state.spec.assignmentId,
    exitCode,
    oomKilled,
    timedOut: stopCause === 'timeout',
    canceled: stopCause === 'cancel',
    outputLimitExceeded: stopCause === 'watchdog',
    startedAt: state.startedAt,
    finishedAt,
    imageDigest: state.imageDigest,
  };
}

/** The job's last `system` line: its exit code and why it ended. */
export function exitLine(exit: JobExit): string {
  return `exited with code ${exit.exitCode}${exit.oomKilled ? ' (out of memory)' : ''}${exit.timedOut ? ' (stopped at maxRuntimeSeconds)' : ''}${exit.canceled ? ' (canceled)' : ''}${exit.outputLimitExceeded ? ' (output limit exceeded)' : ''}`;
}

/** Writes an agent line (`stream: 'system'`) to the log file first, then to the sink. */
export function systemWriter(log: LogFile, sink: LogSink, now: () => number): (line: string) => void {
  return (line) => {
    const entry: RuntimeLogLine = { stream: 'system', line, ts: now(), cursor: null };
    log.append(entry);
    sink(entry);
  };
}

/**
 * Supervises one started container until it exits or the agent lets go of it: stops it at
 * `maxRuntimeSeconds` (the deadline), when /output passes its limit without a loop mount (the
 * watchdog) or on cancel; turns the egress proxy's decisions into `system` lines; forwards its
 * lines to the log file and the sink; and, once it exited, writes the exit record. `run` starts
 * every concern and returns the job's handle; each concern is also a method of its own.
 */
export class ContainerSupervisor {
  readonly system: (line: string) => void;
  private readonly routes: LogRoutes;
  private cause: StopCause | null = null;
  private detached = false;
  private deadline: NodeJS.Timeout | null = null;
  private watchdog: NodeJS.Timeout | null = null;
  private egress: EgressLogFollower | null = null;
  private logStream: NodeJS.ReadableStream | null = null;
  private logsDone: Promise<LogCursor | null> | null = null;
  private readonly detachSignal: Promise<never>;
  private rejectDetached!: (err: DetachedError) => void;

  constructor(private readonly o: ContainerSupervisorOptions) {
    this.system = systemWriter(o.log, o.sink, o.now);
    this.routes = logRoutes(o.fileAfter, o.sinkAfter ? parseCursor(o.sinkAfter) : o.fileAfter);
    this.detachSignal = new Promise<never>((_, reject) => (this.rejectDetached = reject));
    this.detachSignal.catch(() => undefined);
  }

  /** Why the agent stopped the container, or null. */
  get stopCause(): StopCause | null {
    return this.cause;
  }

  /** Starts every concern and returns the job's handle. */
  run(): JobHandle {
    const { state, dir } = this.o;
    this.followEgress();
    this.armDeadline();
    if (state.outputMount === 'watchdog') this.armWatchdog();
    this.forwardLogs();
    const done = this.waitForExit();
    // A detached job's `done` rejects whether or not anyone awaits it.
    done.catch(() => undefined);
    return {
      assignmentId: state.spec.assignmentId,
      spec: state.spec,
      containerId: state.containerId,
      imageDigest: state.imageDigest,
      startedAt: state.startedAt,
      outputDir: join(dir, 'output'),
      logFile: join(dir, 'log.jsonl'),
      done,
      cancel: (note) => this.cancel(note),
      detach: () => this.detach(),
    };
  }

  /**
   * Stops the container (SIGTERM, then SIGKILL after `graceSeconds`) once: the first cause is
   * the one the exit record reports. A container already stopped or gone is no failure.
   */
  async stop(cause: StopCause, graceSeconds: number): Promise<void> {
    if (this.cause) return;
    this.cause = cause;
    try {
      await this.o.container.stop({ t: graceSeconds });
    } catch (err) {
      const code = (err as { statusCode?: number }).statusCode;
      if (code !== 304 && code !== 404) this.system(`stopping the container failed: ${errorText(err)}`);
    }
  }

  /** Stops the job at `maxRuntimeSeconds` from its start (at once when a resumed job is past it). */
  armDeadline(): void {
    const { spec } = this.o.state;
    this.deadline = setTimeout(() => {
      this.system(`maxRuntimeSeconds (${spec.maxRuntimeSeconds}) reached: stopping (SIGTERM, then SIGKILL after ${this.o.graceSeconds} s)`);
      void this.stop('timeout', this.o.graceSeconds);
    }, remainingRuntimeMs(this.o.state, this.o.now()));
  }

  /** Measures /output every `WATCHDOG_INTERVAL_MS`, one measurement at a time, until the job exits. */
  armWatchdog(): void {
    let measuring = false;
    this.watchdog = setInterval(() => {
      if (measuring) return;
      measuring = true;
      void this.checkOutput().finally(() => (measuring = false));
    }, WATCHDOG_INTERVAL_MS);
  }

  /** One watchdog measurement: stops the job at once (no grace) when /output holds more than its limit. */
  async checkOutput(): Promise<void> {
    const { outputLimitBytes } = this.o.state;
    const bytes = await treeBytes(join(this.o.dir, 'output'));
    if (bytes > outputLimitBytes && !this.cause) {
      this.system(`/output holds ${bytes} bytes, more than the ${outputLimitBytes} allowed: stopping the job`);
      await this.stop('watchdog', 0);
    }
  }

  /** For an allowlist job: the proxy's decisions become the job's system lines; proxy and network go when it ends. */
  followEgress(): void {
    const { state, docker, owner, dir } = this.o;
    if (state.spec.networkPolicy.mode !== 'allowlist') return;
    this.egress = followEgressLog(docker, { owner, assignmentId: state.spec.assignmentId, dir }, this.system);
  }

  /** Follows the container's lines from `resumeAt` to the log file and the sink, each where it is missing. */
  forwardLogs(): void {
    this.logsDone = this.follow(this.routes.resumeAt, (stream) => {
      this.logStream = stream;
      if (this.detached) (stream as unknown as { destroy: () => void }).destroy();
    });
  }

  /** Hands one line to the log file and the sink, where the routes admit it; nothing once detached. */
  deliver(line: RuntimeLogLine): void {
    if (this.detached) return;
    const cursor = line.cursor ? parseCursor(line.cursor) : null;
    if (!cursor || this.routes.toFile(cursor)) this.o.log.append(line);
    if (!cursor || this.routes.toSink(cursor)) this.o.sink(line);
  }

  /** Says why, then stops the job with the grace period; `done` reports `canceled`. */
  async cancel(note?: string): Promise<void> {
    this.system(note ?? 'canceled: stopping (SIGTERM, then SIGKILL after the grace period)');
    await this.stop('cancel', this.o.graceSeconds);
  }

  /** Lets go of the container, leaving it running: followers end, the log file closes, `done` rejects. */
  async detach(): Promise<void> {
    if (this.detached) return;
    this.detached = true;
    this.rejectDetached(new DetachedError(this.o.state.spec.assignmentId));
    (this.logStream as unknown as { destroy?: () => void } | null)?.destroy?.();
    await this.egress?.detach();
    await this.logsDone?.catch(() => undefined);
    await this.o.log.close().catch(() => undefined);
  }

  /**
   * Waits for the exit (or a detach), then delivers the last lines, removes the egress proxy,
   * closes the log file and writes the exit record (`exit.json`).
   * @throws DetachedError when the agent let go of the job first
   */
  async waitForExit(): Promise<JobExit> {
    const { container, state } = this.o;
    let exitCode: number | null = null;
    try {
      exitCode = (await Promise.race([this.o.exited, this.stoppedAfterLogs(), this.detachSignal])).StatusCode;
    } catch (err) {
      if (err instanceof DetachedError) {
        this.disarm();
        await this.egress?.detach();
        throw err;
      }
      this.system(`waiting for the container failed: ${errorText(err)}`);
    }
    this.disarm();
    if (this.detached) throw new DetachedError(state.spec.assignmentId);
    const resumeAt = this.routes.resumeAt;
    const lastLine = await (this.logsDone ?? Promise.resolve(resumeAt)).catch((err: unknown) => {
      this.system(`reading the container's logs failed: ${errorText(err)}`);
      return resumeAt;
    });
    await this.catchUp(lastLine).catch(() => undefined);
    let info: Docker.ContainerInspectInfo | null = null;
    try {
      info = await container.inspect();
    } catch {
      // Removed behind our back: the wait's status is all there is.
    }
    if (this.detached) throw new DetachedError(state.spec.assignmentId);
    if (this.egress) await this.egress.finish().catch((err: unknown) => this.system(`removing the egress proxy failed: ${errorText(err)}`));
    if (info) exitCode = info.State.ExitCode;
    const exit = exitRecord({ state, exitCode, info: info?.State ?? null, stopCause: this.cause, now: this.o.now() });
    this.system(exitLine(exit));
    await this.o.log.close();
    await writeJson(join(this.o.dir, 'exit.json'), exit);
    return exit;
  }

  /** Clears the deadline and the watchdog. */
  private disarm(): void {
    if (this.deadline) clearTimeout(this.deadline);
    if (this.watchdog) clearInterval(this.watchdog);
  }

  /**
   * The exit as Docker's state has it once the follower ended: the follower ends when the
   * container stops, so this holds even if the wait request missed the exit.
   */
  private async stoppedAfterLogs(): Promise<WaitResult> {
    await this.logsDone?.catch(() => undefined);
    for (;;) {
      if (this.detached) return new Promise<never>(() => undefined);
      const info = await this.o.container.inspect().catch(() => null);
      if (info && !info.State.Running) return { StatusCode: info.State.ExitCode };
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /**
   * Follows the container's log (after `after`) until it exits; resolves with the cursor of the
   * last line emitted once the stream ended.
   */
  private async follow(after: LogCursor | null, opened: (stream: NodeJS.ReadableStream) => void): Promise<LogCursor | null> {
    const stream = (await this.o.container.logs({
      follow: true,
      stdout: true,
      stderr: true,
      timestamps: true,
      ...(after ? { since: sinceSeconds(after) } : {}),
    })) as unknown as NodeJS.ReadableStream;
    opened(stream);
    let last = after;
    const parser = lineParser(after, (line, cursor) => {
      last = cursor;
      this.deliver(line);
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
  private async catchUp(after: LogCursor | null): Promise<void> {
    const bytes = (await this.o.container.logs({ follow: false, stdout: true, stderr: true, timestamps: true, ...(after ? { since: sinceSeconds(after) } : {}) })) as unknown as Buffer;
    const parser = lineParser(after, (line) => this.deliver(line));
    parser.push(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
    parser.end();
  }
}

function lineParser(after: LogCursor | null, emit: (line: RuntimeLogLine, cursor: LogCursor) => void): DockerLogParser {
  return new DockerLogParser((stream, text, cursor) => {
    const ts = timestampMs(cursor.ts);
    // Every piece of a long line carries the line's cursor: a resume drops all of them or none.
    for (const line of splitLong(text)) emit({ stream, line, ts, cursor: formatCursor(cursor) }, cursor);
  }, after);
}
