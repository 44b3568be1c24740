import type { AssignmentRejectedMessage, AssignmentStatusMessage } from '@gpufarm/shared';
import type { LifecyclePort } from '../agent-gateway/lifecycle-port.js';
import type { Database } from '../db/database.js';
import { recordFleetEvent } from '../fleet/events.js';
import { authorizePendingRefund } from '../jobs/settlement.js';
import { applyTransition, findJobById, findJobKind, lockJobOfAssignment, notifyJobQueued } from '../jobs/store.js';
import { transitionFor } from '../jobs/transitions.js';
import { appendServiceLine } from '../logs/store.js';
import { releaseAssignmentGpus } from '../machines/gpus-store.js';
import { notifyAgent } from '../dispatch/store.js';
import { recordPhases } from '../phases/record.js';
import type { ReportedBoundary } from '../phases/store.js';
import { serverNow, type ExecutionDeps } from './deps.js';
import { FAILURE_RULES, MAX_ATTEMPTS, type FailureCode } from './failures.js';
import { settleFinished } from './finish.js';
import { advanceAgentState, cancelLiveAssignments, countEndedRuns, excludeMachine, findAssignment, LIVE_STATES, moveAssignment, recordFinishReport, recordRunEnded } from './store.js';

/**
 * What happens to a job when its assignment moves: the
 * gateway calls these for each agent message and for its sweeps (through `executionLifecycle`);
 * every job change goes through the transition table as one guarded write.
 */

/** The gateway's lifecycle port, answered by this slice with `deps`. */
export function executionLifecycle(deps: ExecutionDeps): LifecyclePort {
  return {
    assignmentAccepted: (machineId, assignmentId) => assignmentAccepted(deps, machineId, assignmentId),
    assignmentRejected: (machineId, assignmentId, reason, message) => assignmentRejected(deps, machineId, assignmentId, reason, message),
    assignmentStatus: (machineId, message) => assignmentStatus(deps, machineId, message),
    assignmentLost: (assignmentId, reason) => assignmentLost(deps, assignmentId, reason),
    assignmentGpuFailed: (assignmentId, reason) => assignmentGpuFailed(deps, assignmentId, reason),
  };
}

/** The agent's states in the order they happen: a report never moves an assignment back. */
const AGENT_STATE_RANK: Readonly<Record<AssignmentStatusMessage['state'], number>> = {
  pulling: 1,
  starting: 2,
  running: 3,
  stopping: 4,
  exited: 5,
  uploading: 6,
  finished: 7,
  failed: 7,
};

/** The agent's reports that say the container ended (the server's end of the billed window). */
const ENDED_STATES: ReadonlySet<AssignmentStatusMessage['state']> = new Set(['exited', 'uploading', 'finished']);

/** The agent accepted an offered assignment. */
export async function assignmentAccepted(deps: ExecutionDeps, machineId: string, assignmentId: string): Promise<void> {
  await moveAssignment(deps.db, { id: assignmentId, machineId, from: ['offered'], to: 'accepted', set: { accepted_at: new Date() } });
}

/**
 * The agent refused an offered assignment (or did not answer in time: `reason` `timeout`):
 * the job goes back to QUEUED and the machine is excluded for it; its GPUs are freed.
 */
export async function assignmentRejected(
  deps: ExecutionDeps,
  machineId: string,
  assignmentId: string,
  reason: AssignmentRejectedMessage['reason'] | 'timeout',
  message: string,
): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const asg = await moveAssignment(tx, { id: assignmentId, machineId, from: ['offered', 'accepted'], to: 'rejected', set: { failure_code: reason, failure_message: message.slice(0, 2000) } });
    if (!asg) return;
    await releaseAssignmentGpus(tx, asg.id);
    await excludeMachine(tx, asg.job_id, machineId, reason);
    const why = reason === 'timeout' ? 'the machine did not answer in time' : `the machine declined (${reason})`;
    // A service job (a canary of the time machines were verified by one) is for this machine only: refused, it fails.
    if ((await findJobKind(tx, asg.job_id)) === 'verification') {
      await applyTransition(tx, { jobId: asg.job_id, from: 'MATCHING', to: transitionFor('MATCHING', 'fail').to, assignmentId: asg.id, set: { assignment_id: null, failure_reason: why } });
      return;
    }
    const moved = await applyTransition(tx, { jobId: asg.job_id, from: 'MATCHING', to: transitionFor('MATCHING', 'unmatch').to, assignmentId: asg.id, set: { assignment_id: null } });
    if (moved) {
      await appendServiceLine(tx, asg.job_id, `not started: ${why}; queued again for another machine`);
      await notifyJobQueued(tx, asg.job_id);
    }
  });
}

/**
 * An `assignment.status` from the agent of `machineId` (ignored when the assignment is not
 * that machine's): `running` starts the job, `finished` verifies and settles it, `failed`
 * requeues it (at most two more times) or fails it; `uploading` becomes a system line (the
 * machine's own notes tell the other steps). The server's clock says when the run started and ended
 * (the first report of each, as received); the machine's own times are kept beside them.
 */
export async function assignmentStatus(deps: ExecutionDeps, machineId: string, message: AssignmentStatusMessage): Promise<void> {
  const receivedAt = serverNow(deps);
  const asg = await findAssignment(deps.db, message.assignmentId);
  if (!asg || asg.machine_id !== machineId || !(LIVE_STATES as readonly string[]).includes(asg.state)) return;
  if (message.state === 'failed') {
    const failure = message.failure ?? { code: 'internal' as const, message: 'the agent reported a failure without a reason' };
    await failAssignment(deps, asg.id, failure.code, failure.message, { exitFacts: message });
    return;
  }
  // A report moves the agent state forward only, so a report repeated after a restart writes no second line.
  const advanced = await advanceAgentState(deps.db, asg.id, message.state, AGENT_STATE_RANK);
  const starts = message.state === 'running' || (message.startedAt !== null && asg.state !== 'running');
  if (starts) await startJob(deps, asg.id, message, receivedAt);
  await recordPhases(deps, asg.id, boundariesOf(message.state, starts), receivedAt);
  if (ENDED_STATES.has(message.state)) {
    await recordRunEnded(deps.db, asg.id, { receivedAt, reportedStartedAt: reportedTime(message.startedAt), reportedFinishedAt: reportedTime(message.finishedAt) });
  }
  if (advanced) {
    const line = statusLine(message);
    if (line) await appendServiceLine(deps.db, asg.job_id, line);
  }
  if (message.state === 'finished') {
    await recordFinishReport(deps.db, asg.id, message);
    await settleFinished(deps, asg.id).catch((err: unknown) => deps.log?.warn({ jobId: asg.job_id, assignmentId: asg.id, machineId: asg.machine_id, err }, `settling assignment ${asg.id} failed; the execution worker retries`));
  }
}

/** The start phases' boundaries a report shows (`phases/`): its own, and running when it starts the job as billing counts it. */
function boundariesOf(state: AssignmentStatusMessage['state'], starts: boolean): ReportedBoundary[] {
  const seen: ReportedBoundary[] = starts ? ['runningAt'] : [];
  if (state === 'pulling') seen.push('pullStartedAt');
  if (state === 'starting') seen.push('imageReadyAt');
  if (ENDED_STATES.has(state)) seen.push('exitedAt');
  if (state === 'finished') seen.push('finishedAt');
  return seen;
}

/**
 * The service's line for an agent state, where the machine's own notes do not already say it
 * (pulling, started, stopping at the limit and exited with code: on stderr, `MACHINE_NOTE_PREFIX`).
 */
function statusLine(message: AssignmentStatusMessage): string | null {
  switch (message.state) {
    case 'uploading':
      return 'uploading outputs and logs';
    default:
      return null;
  }
}

/** A time the machine reported, on its own clock: kept for display, never billed alone. */
function reportedTime(iso: string | null): Date | null {
  return iso === null ? null : new Date(iso);
}

/**
 * MATCHING -> RUNNING when the container started (an `accepted` that never arrived is implied):
 * `started_at` is when the server received it, the machine's own start goes to `reported_started_at`.
 */
async function startJob(deps: ExecutionDeps, assignmentId: string, message: AssignmentStatusMessage, receivedAt: Date): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const asg = await moveAssignment(tx, {
      id: assignmentId,
      machineId: null,
      from: ['offered', 'accepted'],
      to: 'running',
      set: { started_at: receivedAt, reported_started_at: reportedTime(message.startedAt), image_digest: message.imageDigest },
    });
    if (!asg) return;
    await applyTransition(tx, { jobId: asg.job_id, from: 'MATCHING', to: transitionFor('MATCHING', 'start').to, assignmentId });
  });
}

/**
 * The machine holding the assignment is gone (offline past the grace period, or its agent came
 * back without it): the job is requeued (at most two more times) or failed, the machine excluded.
 */
export async function assignmentLost(deps: ExecutionDeps, assignmentId: string, reason: string): Promise<void> {
  await failAssignment(deps, assignmentId, 'machine_lost', reason, { lost: true });
}

/**
 * A GPU the assignment holds failed (the machine's health report): the job is requeued (at most
 * two more times) or failed and refunded, the machine excluded for it, and its agent told to
 * stop the container (the machine stays online for its other GPUs).
 */
export async function assignmentGpuFailed(deps: ExecutionDeps, assignmentId: string, reason: string): Promise<void> {
  await failAssignment(deps, assignmentId, 'gpu_failed', reason, { cancelAgent: true });
}

/**
 * The machine's drain deadline passed with the assignment still live: it is failed as
 * `machine_drained` (requeued, never charged) and the agent told to stop it.
 */
export async function assignmentDrained(deps: ExecutionDeps, assignmentId: string, reason: string): Promise<void> {
  await failAssignment(deps, assignmentId, 'machine_drained', reason, { cancelAgent: true });
}

/**
 * Ends a live assignment without a result: its GPUs are freed, and its job is queued again
 * (`retry`) while attempts remain and the failure is worth retrying, else FAILED with the
 * refund authorized (a FAILED job is never charged).
 */
async function failAssignment(
  deps: ExecutionDeps,
  assignmentId: string,
  code: FailureCode,
  message: string,
  options: { lost?: boolean; exitFacts?: AssignmentStatusMessage; cancelAgent?: boolean },
): Promise<void> {
  const rule = FAILURE_RULES[code];
  const failedJob = await deps.db.transaction(async (tx) => {
    const asg = await moveAssignment(tx, {
      id: assignmentId,
      machineId: null,
      from: LIVE_STATES,
      to: options.lost ? 'lost' : 'failed',
      set: { failure_code: code, failure_message: message.slice(0, 2000), finished_at: serverNow(deps), exit_code: options.exitFacts?.exitCode ?? null },
    });
    if (!asg) return null;
    await releaseAssignmentGpus(tx, asg.id);
    if (options.cancelAgent) await notifyAgent(tx, { machineId: asg.machine_id, assignmentId: asg.id, kind: 'cancel', reason: `${rule.summary}: ${message}`.slice(0, 500) });
    if (rule.excludeMachine) await excludeMachine(tx, asg.job_id, asg.machine_id, code);
    const job = await lockJobOfAssignment(tx, asg.job_id, asg.id);
    if (!job) return null;
    // Runs that ended without a result, this one included (a machine's refusal is not a run).
    const attempts = await countEndedRuns(tx, asg.job_id);
    // A service job (a canary of the time machines were verified by one) is never run again elsewhere.
    const canary = job.kind === 'verification';
    const retry = rule.retried && attempts < MAX_ATTEMPTS && !canary;
    const transition = transitionFor(job.status, retry ? 'retry' : 'fail');
    const refund = transition.effects.includes('authorize_refund');
    const why = `${rule.summary}: ${message}`.slice(0, 1900);
    await applyTransition(tx, {
      jobId: asg.job_id,
      from: job.status,
      to: transition.to,
      assignmentId: asg.id,
      set: { assignment_id: null, ...(retry ? {} : { failure_reason: why }) },
    });
    await appendServiceLine(
      tx,
      asg.job_id,
      retry
        ? `attempt ${attempts} of ${MAX_ATTEMPTS} failed: ${why}; queued again`
        : `failed: ${why}${rule.retried ? ` (after ${attempts} attempts)` : ''}; nothing is charged and the escrow refund is authorized`,
    );
    if (retry) await notifyJobQueued(tx, asg.job_id);
    await recordFleetEvent(tx, {
      type: 'job.failed',
      machineId: asg.machine_id,
      jobId: asg.job_id,
      message: retry ? `attempt ${attempts} failed (${code}): ${why}; queued again` : `job failed (${code}): ${why}`,
      details: { code, attempt: attempts, requeued: retry, jobFailed: !retry },
    });
    return refund && !canary ? asg.job_id : null;
  });
  if (failedJob && deps.escrow) {
    const job = await findJobById(deps.db, failedJob);
    if (job) await authorizePendingRefund({ db: deps.db, escrow: deps.escrow }, job).catch((err: unknown) => deps.log?.warn({ jobId: failedJob, err }, `refund authorization for ${failedJob} failed; the escrow worker retries it`));
  }
}

/** A job was canceled while MATCHING: its assignment is dropped, its GPUs freed and the agent told to stop. */
export async function jobCanceled(db: Database, jobId: string): Promise<void> {
  await db.transaction(async (tx) => {
    for (const row of await cancelLiveAssignments(tx, jobId)) {
      await releaseAssignmentGpus(tx, row.id);
      await notifyAgent(tx, { machineId: row.machine_id, assignmentId: row.id, kind: 'cancel', reason: 'the customer canceled the job' });
    }
  });
}
