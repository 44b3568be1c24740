import type { AssignmentSpec, AssignmentStatusMessage, RunningAssignment } from '@gpufarm/shared';
import type { LogSink } from '../logs/shipper.js';

/**
 * The port between the link and the Docker runtime (`runtime/docker-runner.ts` implements it).
 * The daemon owns the link and the log shipper; the runtime owns containers. The daemon calls
 * the runner; the runner reports back through `AssignmentReporter`.
 *
 * Flow: `assign` arrives -> `runner.accept(spec, ctx)` decides synchronously-ish whether it can
 * take the job (GPUs free, disk, not draining) -> the daemon sends `assignment.accepted` or
 * `assignment.rejected` -> the runner pulls, starts and supervises the container, writing every
 * output line to `ctx.logs` and each state change to `ctx.report`. Log lines are numbered and
 * resent by the link; the runner never talks to the socket.
 */
export interface AssignmentRunner {
  /**
   * Takes an assignment or refuses it. Resolve `{accepted: true}` once the assignment is the
   * runner's (it then runs in the background); refuse with a reason otherwise. Must not throw
   * for an ordinary refusal.
   */
  accept(spec: AssignmentSpec, ctx: AssignmentContext): Promise<AcceptResult>;
  /** Stops an assignment (customer cancel); outputs so far are still uploaded and reported. */
  cancel(assignmentId: string, reason: string): Promise<void>;
  /**
   * What the runner holds after a restart (containers found by label) or right now, for `hello`.
   * `nextLogSeq` is where the assignment's numbering continues.
   */
  running(): Promise<RunningAssignment[]>;
  /**
   * Re-attaches the assignments found at start: the daemon opens their log sinks (continuing
   * at `nextLogSeq`) and hands them over. Called once, before the first `hello`.
   */
  restore(open: (assignmentId: string, firstSeq: number) => AssignmentContext): Promise<void>;
  /** The link is down (`true`) or back (`false`): uploads wait while it is down. */
  setPartitioned(partitioned: boolean): void;
  /**
   * The control plane has confirmed no heartbeat for `seconds`, the partition grace: it may
   * soon give this machine's assignments to other machines. Running containers are stopped now,
   * and any that starts while this holds (their outputs are kept for upload); null: the control
   * plane is heard from again.
   */
  contactLost(lost: { seconds: number } | null): void;
  /** Stops supervising (agent shutdown); containers keep running for the next start to find. */
  close(): Promise<void>;
}

export type AcceptResult = { accepted: true } | { accepted: false; reason: 'not_ready' | 'draining' | 'unhealthy' | 'gpus_unavailable' | 'duplicate' | 'unsupported' | 'invalid' | 'image_cache_full'; message: string };

/** A state change as the runner reports it; the daemon adds `type`, `assignmentId` and `at`. */
export type AssignmentReport = Omit<AssignmentStatusMessage, 'type' | 'assignmentId' | 'at'>;

export interface AssignmentContext {
  assignmentId: string;
  /** The assignment's log sink: numbered, batched, acked, resent after reconnects. */
  logs: LogSink;
  /** Sends `assignment.status` now, or as soon as the link is back (reports are queued in order). */
  report(status: AssignmentReport): void;
  /** True while the control plane cannot be reached. */
  readonly partitioned: boolean;
}

/**
 * A runner without containers, for daemons that only exercise the link (the link bench and
 * tests): it refuses every assignment with a reason the control plane can show. `gf-agent run`
 * uses the Docker runner (`daemon/runner-setup.ts`).
 */
export function rejectingRunner(message = 'this daemon has no container runtime (it only runs the link)'): AssignmentRunner {
  return {
    accept: async () => ({ accepted: false, reason: 'unsupported', message }),
    cancel: async () => undefined,
    running: async () => [],
    restore: async () => undefined,
    setPartitioned: () => undefined,
    contactLost: () => undefined,
    close: async () => undefined,
  };
}
