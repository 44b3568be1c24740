import { assignmentAccepted, assignmentLost, assignmentRejected, assignmentStatus } from '../execution/lifecycle.js';

/**
 * The lifecycle entry points the gateway calls for agent messages and sweeps
 * (`execution/lifecycle.ts`), as a port so a test can count the calls.
 */
export interface LifecyclePort {
  assignmentAccepted: typeof assignmentAccepted;
  assignmentRejected: typeof assignmentRejected;
  assignmentStatus: typeof assignmentStatus;
  assignmentLost: typeof assignmentLost;
}

export const executionLifecycle: LifecyclePort = { assignmentAccepted, assignmentRejected, assignmentStatus, assignmentLost };
