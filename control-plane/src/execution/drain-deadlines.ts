import { assignmentsPastDrainDeadline } from '../machines/drain-store.js';
import type { ExecutionDeps } from './deps.js';
import { assignmentDrained } from './lifecycle.js';

/**
 * The drain deadline sweep (a step of the execution worker, safe on several replicas: each
 * assignment moves once): live assignments of drained machines whose deadline passed are
 * failed as `machine_drained` (requeued, never charged) and their agents told to stop them.
 * Returns how many it stopped.
 */
export async function sweepDrainDeadlines(deps: ExecutionDeps): Promise<number> {
  const due = await assignmentsPastDrainDeadline(deps.db, 500);
  for (const a of due) await assignmentDrained(deps, a.id, `its drain deadline ${a.deadline.toISOString()} passed`);
  return due.length;
}
