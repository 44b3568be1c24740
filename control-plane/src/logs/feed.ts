import type { Database } from '../db/database.js';
import { JOB_LOG_CHANNEL } from './channels.js';

/**
 * One LISTEN on `job_log` per process, fanned out to the open log streams by job id, so a
 * stream wakes only for its own job and any replica can serve any job.
 */
export interface JobLogFeed {
  /**
   * Calls `onChange` whenever lines or the status of `jobId` may have changed, and after the
   * LISTEN connection was re-made (notifications may have been missed). Resolves once listening.
   */
  subscribe(jobId: string, onChange: () => void): Promise<() => void>;
  close(): Promise<void>;
}

export function createJobLogFeed(db: Database): JobLogFeed {
  const byJob = new Map<string, Set<() => void>>();
  let listening: Promise<() => Promise<void>> | undefined;

  const dispatch = (payload: string) => {
    // An empty payload: the connection was re-made and anything may have changed.
    const targets = payload === '' ? [...byJob.values()] : [byJob.get(payload) ?? new Set<() => void>()];
    for (const set of targets) for (const onChange of set) onChange();
  };

  return {
    async subscribe(jobId, onChange) {
      listening ??= db.listen(JOB_LOG_CHANNEL, dispatch).catch((err: unknown) => {
        listening = undefined;
        throw err;
      });
      await listening;
      let set = byJob.get(jobId);
      if (!set) byJob.set(jobId, (set = new Set()));
      set.add(onChange);
      return () => {
        set.delete(onChange);
        if (set.size === 0 && byJob.get(jobId) === set) byJob.delete(jobId);
      };
    },
    async close() {
      byJob.clear();
      const unlisten = await listening?.catch(() => undefined);
      listening = undefined;
      await unlisten?.();
    },
  };
}
