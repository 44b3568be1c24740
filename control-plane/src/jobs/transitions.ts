/**
 * Every job state change, as data. One table drives every transition; each is applied as one
 * guarded write (`UPDATE … WHERE id = $1 AND status = $from`), so two writers cannot both win.
 *
 *                 cancel                    cancel
 *   CREATED ───────────────> CANCELED <──────────────┬──────────────┐
 *     │  │  unfunded 24 h                            │              │
 *     │  └──────────> EXPIRED                        │              │
 *     │ funding verified                             │              │
 *     v                                              │              │
 *   FUNDED ──queue──> QUEUED ──match──> MATCHING ────┘              │
 *                       ^  ^               │  agent rejects         │
 *                       │  └───────────────┘  or times out           │
 *                       │ machine lost /    │ container started      │
 *                       │ infra error       v                        │
 *                       └────────────── RUNNING ──exit──> COMPLETED  │
 *                           (retry)       │  └──max runtime──> TIMED_OUT
 *                                         └──retries spent──> FAILED
 *   RUNNING: cancel is refused (409 conflict).
 */
import { GpufarmError, isTerminalStatus, type JobStatus } from '@gpufarm/shared';

export type JobEvent =
  | 'fund'
  | 'queue'
  | 'match'
  | 'unmatch'
  | 'start'
  | 'complete'
  | 'time_out'
  | 'retry'
  | 'fail'
  | 'cancel'
  | 'expire';

/** What a transition does besides changing the status. */
export type JobEffect = 'authorize_refund' | 'record_funding' | 'offer_assignment' | 'settle';

export interface Transition {
  from: JobStatus;
  event: JobEvent;
  to: JobStatus;
  effects: readonly JobEffect[];
}

export const TRANSITIONS: readonly Transition[] = [
  { from: 'CREATED', event: 'fund', to: 'FUNDED', effects: ['record_funding'] },
  { from: 'CREATED', event: 'cancel', to: 'CANCELED', effects: [] },
  { from: 'CREATED', event: 'expire', to: 'EXPIRED', effects: [] },
  { from: 'FUNDED', event: 'queue', to: 'QUEUED', effects: [] },
  { from: 'FUNDED', event: 'cancel', to: 'CANCELED', effects: ['authorize_refund'] },
  { from: 'QUEUED', event: 'cancel', to: 'CANCELED', effects: ['authorize_refund'] },
  { from: 'QUEUED', event: 'match', to: 'MATCHING', effects: ['offer_assignment'] },
  { from: 'MATCHING', event: 'cancel', to: 'CANCELED', effects: ['authorize_refund'] },
  { from: 'MATCHING', event: 'unmatch', to: 'QUEUED', effects: [] },
  { from: 'MATCHING', event: 'start', to: 'RUNNING', effects: [] },
  { from: 'MATCHING', event: 'retry', to: 'QUEUED', effects: [] },
  { from: 'MATCHING', event: 'fail', to: 'FAILED', effects: ['authorize_refund'] },
  { from: 'RUNNING', event: 'complete', to: 'COMPLETED', effects: ['settle'] },
  { from: 'RUNNING', event: 'time_out', to: 'TIMED_OUT', effects: ['settle'] },
  { from: 'RUNNING', event: 'retry', to: 'QUEUED', effects: [] },
  { from: 'RUNNING', event: 'fail', to: 'FAILED', effects: ['authorize_refund'] },
];

/** The table has no row for `event` from `from`: the caller read a state that does not allow it. */
export class ForbiddenTransitionError extends GpufarmError<'forbidden_transition'> {
  constructor(
    readonly from: JobStatus,
    readonly event: JobEvent,
  ) {
    super('forbidden_transition', `a ${from} job cannot ${event}; read the job's status again before acting on it`);
  }
}

/** The transition for `event` from `from`; throws ForbiddenTransitionError when there is none. */
export function transitionFor(from: JobStatus, event: JobEvent): Transition {
  const found = TRANSITIONS.find((t) => t.from === from && t.event === event);
  if (!found) throw new ForbiddenTransitionError(from, event);
  return found;
}

/** Whether moving `from` -> `to` authorizes the escrow refund (the table's `authorize_refund` effect). */
export function authorizesRefund(from: JobStatus, to: JobStatus): boolean {
  return TRANSITIONS.some((t) => t.from === from && t.to === to && t.effects.includes('authorize_refund'));
}

export { isTerminalStatus };
