import type { Database } from '../db/database.js';
import type { JobEffects } from './effects.js';
import { expireUnfundedJobs } from './store.js';
import { transitionFor } from './transitions.js';

/** Jobs expired per transaction; the sweep goes on until none is left. */
const BATCH = 500;

/** `ttlSeconds` as the customer reads it: `24 hours`, `90 minutes`, `45 seconds`. */
function describeAge(ttlSeconds: number): string {
  if (ttlSeconds % 3600 === 0) return `${ttlSeconds / 3600} hour${ttlSeconds === 3600 ? '' : 's'}`;
  if (ttlSeconds % 60 === 0) return `${ttlSeconds / 60} minute${ttlSeconds === 60 ? '' : 's'}`;
  return `${ttlSeconds} second${ttlSeconds === 1 ? '' : 's'}`;
}

/**
 * The `expire` transition: a job nobody funded within `ttlSeconds` of its creation
 * (`GF_UNFUNDED_JOB_TTL_SECONDS`, a day by default) turns EXPIRED, with a system line saying so.
 * Nothing was paid, so nothing is refunded; a funding that reaches the escrow afterwards is
 * credited and refunded like one for a canceled job (`fund-confirm.ts`, `escrow-worker.ts`).
 * Safe on several replicas at once. Returns how many jobs expired.
 */
export async function expireUnfunded(deps: { db: Database; effects: Pick<JobEffects, 'serviceLine'> }, params: { ttlSeconds: number }): Promise<number> {
  const { from, to } = transitionFor('CREATED', 'expire');
  const line = `expired: not funded within ${describeAge(params.ttlSeconds)} of its creation; create the job again to run it (a funding sent now is refunded)`;
  let expired = 0;
  for (;;) {
    const batch = await deps.db.transaction(async (tx) => {
      const ids = await expireUnfundedJobs(tx, { from, to, ageSeconds: params.ttlSeconds, limit: BATCH });
      for (const id of ids) await deps.effects.serviceLine(tx, id, line);
      return ids.length;
    });
    expired += batch;
    if (batch < BATCH) return expired;
  }
}
