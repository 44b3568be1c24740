import type { BlobStore } from '../artifacts/blob-store.js';
import type { ExecutionConfig } from '../config.js';
import type { Database } from '../db/database.js';
import type { EscrowDeps } from '../jobs/funding.js';
import type { StartPhaseMetrics } from '../phases/record.js';
import type { Logger } from '../logger.js';

/** What the execution slice works with, built once in `server.ts` (or a test). */
export interface ExecutionDeps {
  db: Database;
  /** null: no escrow configured (settlement and refunds wait for one). */
  escrow: EscrowDeps | null;
  config: ExecutionConfig;
  blobs: BlobStore;
  /** Where settlement, refund and indexing failures are logged (lines with `jobId`/`assignmentId`); default nowhere. */
  log?: Logger;
  /**
   * The server's clock: when a run's start and end were received, which is what a run is billed
   * on (`billed-runtime.ts`). Default: the wall clock.
   */
  now?: () => Date;
  /** Where each finished start phase is observed (`gf_job_start_phase_seconds`); absent: not observed. */
  metrics?: StartPhaseMetrics;
}

/** The time on the server's clock of `deps`. */
export function serverNow(deps: Pick<ExecutionDeps, 'now'>): Date {
  return deps.now ? deps.now() : new Date();
}
