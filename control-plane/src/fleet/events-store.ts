import type { Queryable } from '../db/database.js';
import type { TimeCursor } from './audit-store.js';
import type { FleetEventType } from '@gpufarm/shared';

export type { FleetEventType };

/** The fleet events' SQL (`events.ts` is their interface). */


export interface FleetEvent {
  id: string;
  at: string;
  type: FleetEventType;
  machineId: string | null;
  farmId: string | null;
  jobId: string | null;
  message: string;
  details: Record<string, unknown>;
}

export interface FleetEventInput {
  type: FleetEventType;
  machineId?: string | null;
  farmId?: string | null;
  jobId?: string | null;
  message: string;
  details?: Record<string, unknown>;
}

/** Without `farmId`, a machine's event takes its farm from the machine, so events filter by farm whoever recorded them. */
export async function insertFleetEvents(db: Queryable, events: readonly FleetEventInput[]): Promise<void> {
  if (events.length === 0) return;
  await db.query(
    `INSERT INTO fleet_events (type, machine_id, farm_id, job_id, message, details)
     SELECT e.v ->> 'type', e.v ->> 'machine_id', coalesce(e.v ->> 'farm_id', m.farm_id), e.v ->> 'job_id', e.v ->> 'message', e.v -> 'details'
       FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(v, n)
       LEFT JOIN machines m ON m.id = e.v ->> 'machine_id'
      ORDER BY e.n`,
    [
      JSON.stringify(
        events.map((e) => ({
          type: e.type, machine_id: e.machineId ?? null, farm_id: e.farmId ?? null, job_id: e.jobId ?? null,
          message: e.message.slice(0, 2000), details: e.details ?? {},
        })),
      ),
    ],
  );
}

interface EventRow {
  id: string;
  at: Date;
  type: FleetEventType;
  machine_id: string | null;
  farm_id: string | null;
  job_id: string | null;
  message: string;
  details: Record<string, unknown>;
}

function eventFromRow(r: EventRow): FleetEvent {
  return { id: r.id, at: r.at.toISOString(), type: r.type, machineId: r.machine_id, farmId: r.farm_id, jobId: r.job_id, message: r.message, details: r.details };
}

/** A page of events, newest first, filtered by types, machine, farm and a time floor. */
export async function listFleetEvents(
  db: Queryable,
  params: { limit: number; after: TimeCursor | null; types?: readonly FleetEventType[]; machineId?: string; farmId?: string; since?: Date },
): Promise<{ events: FleetEvent[]; next: TimeCursor | null }> {
  const rows = await db.query<EventRow>(
    `SELECT id::text, at, type, machine_id, farm_id, job_id, message, details FROM fleet_events
      WHERE ($1::timestamptz IS NULL OR (at, id) < ($1::timestamptz, $2::bigint))
        AND ($3::text[] IS NULL OR type = ANY($3::text[]))
        AND ($4::text IS NULL OR machine_id = $4)
        AND ($5::text IS NULL OR farm_id = $5)
        AND ($6::timestamptz IS NULL OR at >= $6)
      ORDER BY at DESC, id DESC LIMIT $7`,
    [
      params.after?.at ?? null, params.after?.id ?? null, params.types && params.types.length > 0 ? params.types : null,
      params.machineId ?? null, params.farmId ?? null, params.since ?? null, params.limit + 1,
    ],
  );
  const events = rows.slice(0, params.limit).map(eventFromRow);
  const last = events[events.length - 1];
  return { events, next: rows.length > params.limit && last ? { at: last.at, id: last.id } : null };
}

/** Deletes events older than `retentionDays`, at most `batch` of them; returns how many went. */
export async function deleteOldFleetEvents(db: Queryable, retentionDays: number, batch: number): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `WITH gone AS (
       DELETE FROM fleet_events WHERE id IN (
         SELECT id FROM fleet_events WHERE at < now() - make_interval(days => $1) ORDER BY at LIMIT $2)
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [retentionDays, batch],
  );
  return rows[0]?.n ?? 0;
}
