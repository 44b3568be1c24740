import type { AssignmentRejectedMessage, AssignmentStatusMessage } from '@gpufarm/shared';
import type { BlobStore } from '../artifacts/blob-store.js';
import type { ExecutionConfig } from '../config.js';
import type { Database } from '../db/database.js';
import type { EscrowDeps } from '../jobs/funding.js';

/**
 * What happens to a job when its assignment moves (ARCHITECTURE.md sections 4, 5 and 9): the
 * gateway calls these for each agent message and for its sweeps; every job change goes through
 * the transition table as one guarded write.
 */
export interface ExecutionDeps {
  db: Database;
  /** null: no escrow configured (settlement and refunds wait for one). */
  escrow: EscrowDeps | null;
  config: ExecutionConfig;
  blobs: BlobStore;
  log?: (message: string, err?: unknown) => void;
}

/** The agent accepted an offered assignment. */
export async function assignmentAccepted(deps: ExecutionDeps, machineId: string, assignmentId: string): Promise<void> {
  void deps; void machineId; void assignmentId;
  throw new Error('not implemented yet');
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
  void deps; void machineId; void assignmentId; void reason; void message;
  throw new Error('not implemented yet');
}

/**
 * An `assignment.status` from the agent of `machineId` (ignored when the assignment is not
 * that machine's): `running` starts the job, `finished` verifies and settles it, `failed`
 * requeues it (at most two more times) or fails it; other states become system log lines.
 */
export async function assignmentStatus(deps: ExecutionDeps, machineId: string, message: AssignmentStatusMessage): Promise<void> {
  void deps; void machineId; void message;
  throw new Error('not implemented yet');
}

/**
 * The machine holding the assignment is gone (offline past the grace period, or its agent came
 * back without it): the job is requeued (at most two more times) or failed, the machine excluded.
 */
export async function assignmentLost(deps: ExecutionDeps, assignmentId: string, reason: string): Promise<void> {
  void deps; void assignmentId; void reason;
  throw new Error('not implemented yet');
}

/** A job was canceled while MATCHING: its assignment is dropped and the agent told to stop. */
export async function jobCanceled(deps: ExecutionDeps, jobId: string): Promise<void> {
  void deps; void jobId;
  throw new Error('not implemented yet');
}
