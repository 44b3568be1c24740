import type { JobTimeline, JobTimelineEvent, JobTimelineState } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { isTerminalStatus } from './transitions.js';
import { loadJobTimelineRecords, type JobTimelineRecords } from './timeline-store.js';
import type { JobRow } from './store.js';

/**
 * The dashboard's timeline of a job (`GET /dashboard/api/jobs/:id/timeline`): each state the job
 * and its escrow record reached, with the time the record that made it was written and the
 * transaction of each escrow state. `job` must be the caller's (see `requireAccountJob`).
 */
export async function jobTimeline(db: Queryable, params: { job: JobRow; chainId: number }): Promise<JobTimeline> {
  return buildJobTimeline(params.job, await loadJobTimelineRecords(db, params.job, params.chainId));
}

/**
 * The timeline from the records, pure. Where the times come from: created (the row), funded and
 * queued (the `funded` entry, written in the transaction that queued the job; a late funding of a
 * canceled job has only its credit and is never queued), assigned and running (each assignment),
 * the final status (the last status change), the completion and its charge, the dispute (the
 * event scan), the release (its entry; told apart by whose transaction it is: the operator's
 * `release` after the window, the `resolveDispute` of a disputed job, else the customer's
 * `approve` when recorded before the window ended; a dispute past its deadline ends timed out), the refund's authorization (the operator's
 * transaction) and its claim (its entry). Events are in time order; one without a time stays after
 * the event before it.
 */
export function buildJobTimeline(job: JobRow, records: JobTimelineRecords): JobTimeline {
  const events: JobTimelineEvent[] = [];
  const push = (state: JobTimelineState, at: Date | null, txHash: string | null = null) => events.push({ state, at: at?.toISOString() ?? null, txHash });
  const entry = (type: string) => records.billing.find((e) => e.type === type) ?? null;
  const operatorTx = (action: string, txHash: string | null) =>
    txHash ? (records.operatorTransactions.find((t) => t.action === action && t.tx_hash === txHash.toLowerCase()) ?? null) : null;

  push('created', job.created_at);
  const funded = entry('funded');
  if (job.fund_tx_hash) push('funded', funded?.created_at ?? records.creditedAt, job.fund_tx_hash);
  if (funded) push('queued', funded.created_at);
  for (const assignment of records.assignments) {
    push('assigned', assignment.offered_at);
    if (assignment.started_at) push('running', assignment.started_at);
  }
  if (isTerminalStatus(job.status)) push(job.status.toLowerCase() as JobTimelineState, records.statusChangedAt);

  if (job.completion_tx_hash) push('completion_recorded', entry('charge')?.created_at ?? null, job.completion_tx_hash);
  const disputed = job.dispute_tx_hash !== null || job.settlement_status === 'disputed';
  if (disputed) push('disputed', job.disputed_at, job.dispute_tx_hash);
  if (job.dispute_ends_at && (job.settlement_status === 'disputed' || job.dispute_outcome === 'timed_out')) push('dispute_deadline', job.dispute_ends_at);
  if (job.settlement_status === 'released') {
    const releasedAt = entry('release')?.created_at ?? null;
    const how: JobTimelineState =
      job.dispute_outcome === 'timed_out' ? 'dispute_timed_out'
      : disputed || operatorTx('resolveDispute', job.release_tx_hash) ? 'resolved'
      : operatorTx('release', job.release_tx_hash) ? 'released'
      : releasedAt && job.challenge_ends_at && releasedAt < job.challenge_ends_at ? 'approved'
      : 'released';
    if (how !== 'approved' && job.challenge_ends_at) push('challenge_window_ends', job.challenge_ends_at);
    push(how, releasedAt, job.release_tx_hash);
  } else if (job.challenge_ends_at) {
    push('challenge_window_ends', job.challenge_ends_at);
  }
  if (job.refund_status === 'authorized' || job.refund_status === 'claimed') {
    const authorization = operatorTx('authorizeRefund', job.refund_authorize_tx_hash);
    push('refund_authorized', authorization?.state === 'mined' ? authorization.updated_at : null, job.refund_authorize_tx_hash);
  }
  if (job.refund_status === 'claimed') push('refunded', entry('refund')?.created_at ?? null, job.refund_tx_hash);

  const spec = typeof job.spec === 'object' && job.spec !== null ? (job.spec as Record<string, unknown>) : {};
  return { object: 'job_timeline', jobId: job.id, title: job.title, createdAt: job.created_at.toISOString(), spec, events: inTimeOrder(events) };
}

/** Sorts by time, stably; an event without a time sorts as the event before it. */
function inTimeOrder(events: readonly JobTimelineEvent[]): JobTimelineEvent[] {
  let previous = '';
  const keyed = events.map((event, index) => {
    previous = event.at ?? previous;
    return { event, index, key: previous };
  });
  keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.index - b.index));
  return keyed.map((k) => k.event);
}
