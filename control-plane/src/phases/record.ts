import type { StartPhaseName } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { phasesDone, startupOf } from './phases.js';
import { recordBoundaries, type ReportedBoundary } from './store.js';

/** Where finished phases are observed (`metrics/registry.ts`, `gf_job_start_phase_seconds`). */
export interface StartPhaseMetrics {
  startPhase(phase: StartPhaseName, seconds: number): void;
}

/**
 * Records the boundaries a report (or the job's first line) shows, at `at` on the control
 * plane's clock, and observes each phase this completes. `queued` is never observed here: it
 * is done with the offer, and `gf_job_queue_wait_seconds` times it then.
 */
export async function recordPhases(
  deps: { db: Queryable; metrics?: StartPhaseMetrics | undefined },
  assignmentId: string,
  seen: readonly ReportedBoundary[],
  at: Date,
): Promise<void> {
  if (seen.length === 0) return;
  const change = await recordBoundaries(deps.db, assignmentId, seen, at);
  if (!change || !deps.metrics) return;
  for (const { phase, seconds } of phasesDone(startupOf(change.before), startupOf(change.after))) deps.metrics.startPhase(phase, seconds);
}
