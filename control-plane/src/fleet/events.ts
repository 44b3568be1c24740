import type { Queryable } from '../db/database.js';
import { deleteOldFleetEvents, insertFleetEvents, type FleetEventInput } from './events-store.js';

/**
 * Fleet events: what happened to machines, farms and their jobs, recorded where it happens
 * (enrollment, the agent link, status changes, drain, the sweeper, job failures). Written
 * only on a change, never per heartbeat; kept `FLEET_EVENT_RETENTION_DAYS` by a sweep.
 */

export type { FleetEvent, FleetEventInput, FleetEventType } from './events-store.js';
export { listFleetEvents } from './events-store.js';

export { FLEET_EVENT_TYPES } from '@gpufarm/shared';

/** Days an event is kept: a quarter covers the incidents an admin looks back on. */
export const FLEET_EVENT_RETENTION_DAYS = 90;

/** Appends one event (in the caller's transaction when `db` is one). */
export async function recordFleetEvent(db: Queryable, event: FleetEventInput): Promise<void> {
  await insertFleetEvents(db, [event]);
}

/** Appends several events in one statement. */
export async function recordFleetEvents(db: Queryable, events: readonly FleetEventInput[]): Promise<void> {
  await insertFleetEvents(db, events);
}

/** The retention sweep's step: deletes events past the retention, a batch at a time; returns how many went. */
export function sweepOldFleetEvents(db: Queryable, options: { retentionDays?: number; batch?: number } = {}): Promise<number> {
  return deleteOldFleetEvents(db, options.retentionDays ?? FLEET_EVENT_RETENTION_DAYS, options.batch ?? 10_000);
}
