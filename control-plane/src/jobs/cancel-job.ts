import type { Database } from '../db/database.js';
import type { JobEffects } from './effects.js';
import type { EscrowDeps } from './funding.js';
import { JobConflictError, JobNotFoundError } from './job-errors.js';
import { authorizePendingRefund } from './settlement.js';
import { applyTransition, findJob, type JobRow } from './store.js';
import { ForbiddenTransitionError, isTerminalStatus, transitionFor, type Transition } from './transitions.js';

/** How long a cancel answer waits for the refund authorization's receipt. */
const REFUND_WAIT_MS = 2_000;

export interface CancelJobDeps {
  db: Database;
  /** The escrow deployment; null when funding is not configured (no refund to authorize). */
  escrow: EscrowDeps | null;
  effects: Pick<JobEffects, 'canceledWhileMatching'>;
  /** Told when the refund authorization fails (the escrow worker retries it). */
  warn?: (fields: { err: unknown; jobId: string }, message: string) => void;
}

export interface CancelJobParams {
  accountId: string;
  jobId: string;
  /** The customer's reason, kept with the job. */
  reason: string | null;
}

/** The cancel move from `row`'s state, or JobConflictError when the table has none (running, final). */
function cancelTransition(row: JobRow): Transition {
  try {
    return transitionFor(row.status, 'cancel');
  } catch (err) {
    if (!(err instanceof ForbiddenTransitionError)) throw err;
    throw new JobConflictError(
      row.status === 'RUNNING'
        ? 'The job is running and cannot be canceled; it stops at maxRuntimeSeconds.'
        : `The job is ${row.status}${isTerminalStatus(row.status) ? ', which is final' : ''}; it cannot be canceled.`,
      [{ field: 'status', message: `status is ${row.status}` }],
    );
  }
}

/**
 * Cancels a job of the account: CREATED refunds nothing; FUNDED,
 * QUEUED and MATCHING authorize the escrow refund (the answer waits for it at most
 * REFUND_WAIT_MS, then it goes on in the background and the escrow worker retries a failure);
 * a MATCHING job's assignment is dropped and its agent told (`effects.canceledWhileMatching`).
 * A job already CANCELED is returned as it is. A lost race re-reads the job and decides again,
 * so the answer is about its newest state. Returns the job row.
 * Throws JobNotFoundError, or JobConflictError for a running or final job.
 */
export async function cancelJob(deps: CancelJobDeps, params: CancelJobParams): Promise<JobRow> {
  const load = async () => {
    const row = await findJob(deps.db, params.accountId, params.jobId);
    if (!row) throw new JobNotFoundError(params.jobId);
    return row;
  };
  let row = await load();
  for (let attempt = 0; attempt < 3; attempt++) {
    if (row.status === 'CANCELED') return row;
    const transition = cancelTransition(row);
    const moved = await applyTransition(deps.db, { jobId: row.id, from: row.status, to: transition.to, cancelReason: params.reason });
    if (moved) {
      if (row.status === 'MATCHING') await deps.effects.canceledWhileMatching(row.id);
      return transition.effects.includes('authorize_refund') ? tryAuthorizeRefund(deps, moved) : moved;
    }
    row = await load();
  }
  throw new JobConflictError('The job changed while canceling it; retry.');
}

/**
 * The `authorize_refund` effect, started at once when the chain answers. The answer waits for
 * it at most REFUND_WAIT_MS (a slow chain mines in seconds); it goes on in the background, and
 * when it fails the escrow worker retries it.
 */
async function tryAuthorizeRefund(deps: CancelJobDeps, row: JobRow): Promise<JobRow> {
  const { escrow } = deps;
  if (!escrow || !escrow.health.current().ok) return row;
  const authorized = authorizePendingRefund({ db: deps.db, escrow }, row).catch((err: unknown) => {
    deps.warn?.({ err, jobId: row.id }, 'refund authorization failed; the escrow worker retries it');
    return row;
  });
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), REFUND_WAIT_MS)));
  const done = await Promise.race([authorized, waited]);
  clearTimeout(timer);
  return done ?? row;
}
