import type { Queryable } from '../db/database.js';

/**
 * What the jobs slice needs from the slices above it, which it does not import: the job's log
 * (`logs/store.ts`) and the execution of a matched job (`execution/lifecycle.ts`). `app.ts`
 * wires them; a job change calls them after (or inside the transaction of) its guarded write.
 */
export interface JobEffects {
  /** Appends one of the service's system lines to the job's log, inside `db`'s transaction when it is one. */
  serviceLine(db: Queryable, jobId: string, line: string): Promise<void>;
  /** A MATCHING job was canceled: its assignment is dropped, its GPUs freed and its agent told to stop. */
  canceledWhileMatching(jobId: string): Promise<void>;
}
