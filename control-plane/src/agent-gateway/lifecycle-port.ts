import type { AssignmentRejectedMessage, AssignmentStatusMessage, ChallengePlan } from '@gpufarm/shared';
import type { ExecutionConfig } from '../config.js';
import type { Database } from '../db/database.js';
import type { StartPhaseMetrics } from '../phases/record.js';
import type { Logger } from '../logger.js';

/**
 * Why agent log lines were not stored as sent: dropped because their assignment ended past the
 * grace (`assignment_ended`) or is not the machine's (`not_this_machine`), or stored as the
 * machine's `stderr` because they claimed the service's own `system` stream (`system_stream`).
 */
export type AgentLogRefusal = 'assignment_ended' | 'not_this_machine' | 'system_stream';

/** What the gateway itself needs: the database, the timings of `config.execution`, a logger. */
export interface GatewayDeps {
  db: Database;
  config: ExecutionConfig;
  log?: Logger;
  /** Where stored agent log bytes and refused agent lines are counted (`metrics/`); absent: not counted. */
  metrics?: { logBytes(bytes: number): void; agentLogLinesRefused(reason: AgentLogRefusal, lines: number): void } & StartPhaseMetrics;
  /** The server's clock, as `ExecutionDeps.now`: when the job's first line was received (`phases/`). Default: the wall clock. */
  now?: () => Date;
  /** Replaces every class's GPU challenge plan (tests that play a machine of a real class on the CPU). */
  challengePlan?: ChallengePlan;
}

/**
 * What the gateway reports about assignments, for each agent message and each sweep finding.
 * The execution slice implements it (`execution/lifecycle.ts` `executionLifecycle`) and
 * `server.ts` wires it in; a test can wrap it to count the calls.
 */
export interface LifecyclePort {
  /** The agent of `machineId` accepted the offered assignment. */
  assignmentAccepted(machineId: string, assignmentId: string): Promise<void>;
  /** The agent refused the offer, or did not answer in time (`timeout`). */
  assignmentRejected(machineId: string, assignmentId: string, reason: AssignmentRejectedMessage['reason'] | 'timeout', message: string): Promise<void>;
  /** An `assignment.status` from the agent of `machineId`. */
  assignmentStatus(machineId: string, message: AssignmentStatusMessage): Promise<void>;
  /** The machine holding the assignment is gone (offline past the grace, or back without it). */
  assignmentLost(assignmentId: string, reason: string): Promise<void>;
  /** A GPU the assignment holds was judged failed from the machine's health report; the agent is told to stop it. */
  assignmentGpuFailed(assignmentId: string, reason: string): Promise<void>;
}
