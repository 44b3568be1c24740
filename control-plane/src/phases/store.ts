import type { JobStatus } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import type { PhaseRun, PhaseTimes } from './phases.js';

/**
 * `job_phases` (migration 033), written here only: one row per assignment, made with the offer
 * and filled in as the control plane receives the machine's reports. Every time is the
 * control plane's (the database's for the queue and the offer, the server's for each report).
 */

/** The boundaries a report can fill in, by column. */
export const PHASE_COLUMNS = {
  pullStartedAt: 'pull_started_at',
  imageReadyAt: 'image_ready_at',
  runningAt: 'running_at',
  firstLogAt: 'first_log_at',
  exitedAt: 'exited_at',
  finishedAt: 'finished_at',
} as const satisfies Partial<Record<keyof PhaseTimes, string>>;
export type ReportedBoundary = keyof typeof PHASE_COLUMNS;

interface PhaseRow {
  assignment_id: string;
  attempt: number;
  state: string;
  queued_at: Date;
  matched_at: Date;
  pull_started_at: Date | null;
  image_ready_at: Date | null;
  running_at: Date | null;
  first_log_at: Date | null;
  exited_at: Date | null;
  finished_at: Date | null;
}

const LIVE = new Set(['offered', 'accepted', 'running']);
const ROW_COLUMNS = `p.assignment_id, a.attempt, a.state, p.queued_at, p.matched_at, p.pull_started_at, p.image_ready_at, p.running_at, p.first_log_at, p.exited_at, p.finished_at`;

function runOf(row: PhaseRow): PhaseRun {
  return {
    assignmentId: row.assignment_id,
    attempt: row.attempt,
    ended: !LIVE.has(row.state),
    times: {
      queuedAt: row.queued_at,
      matchedAt: row.matched_at,
      pullStartedAt: row.pull_started_at,
      imageReadyAt: row.image_ready_at,
      runningAt: row.running_at,
      firstLogAt: row.first_log_at,
      exitedAt: row.exited_at,
      finishedAt: row.finished_at,
    },
  };
}

/**
 * Makes the rows of assignments just offered, inside the matcher's transaction and before it
 * moves their jobs out of QUEUED: `queued_at` is then still when each job entered QUEUED.
 */
export async function recordOffers(tx: Queryable, assignmentIds: readonly string[]): Promise<void> {
  if (assignmentIds.length === 0) return;
  await tx.query(
    // Milliseconds, as the server's own times are: a figure read in SQL then agrees with the API's.
    `INSERT INTO job_phases (assignment_id, job_id, machine_id, queued_at, matched_at)
     SELECT a.id, a.job_id, a.machine_id, date_trunc('milliseconds', j.status_changed_at), date_trunc('milliseconds', a.offered_at)
       FROM assignments a JOIN jobs j ON j.id = a.job_id
      WHERE a.id = ANY($1)
     ON CONFLICT (assignment_id) DO NOTHING`,
    [[...assignmentIds]],
  );
}

/**
 * Sets the boundaries in `seen` that the row lacks, at `at` (the first receipt wins: a report
 * repeated after a reconnect moves nothing). Returns the run before and after, or null when
 * nothing changed (no row: an assignment offered before migration 033; or all already set).
 */
export async function recordBoundaries(db: Queryable, assignmentId: string, seen: readonly ReportedBoundary[], at: Date): Promise<{ before: PhaseRun; after: PhaseRun } | null> {
  const [row] = await db.query<PhaseRow>(`SELECT ${ROW_COLUMNS} FROM job_phases p JOIN assignments a ON a.id = p.assignment_id WHERE p.assignment_id = $1`, [assignmentId]);
  if (!row) return null;
  const missing = seen.filter((b) => row[PHASE_COLUMNS[b]] === null);
  if (missing.length === 0) return null;
  const sets = missing.map((b) => `${PHASE_COLUMNS[b]} = COALESCE(${PHASE_COLUMNS[b]}, $2)`).join(', ');
  const [updated] = await db.query<Omit<PhaseRow, 'attempt' | 'state'>>(
    `UPDATE job_phases SET ${sets} WHERE assignment_id = $1
     RETURNING assignment_id, queued_at, matched_at, pull_started_at, image_ready_at, running_at, first_log_at, exited_at, finished_at`,
    [assignmentId, at],
  );
  if (!updated) return null;
  return { before: runOf(row), after: runOf({ ...updated, attempt: row.attempt, state: row.state }) };
}

/** What a job object's `startup` is made of: the job's status time, and its latest run with phases (null: none). */
export interface JobPhaseSource {
  status: JobStatus;
  statusChangedAt: Date;
  run: PhaseRun | null;
}

/** The latest run of each job (by offer), with its phases, in one statement. */
export async function loadJobPhases(db: Queryable, jobIds: readonly string[]): Promise<Map<string, JobPhaseSource>> {
  if (jobIds.length === 0) return new Map();
  const rows = await db.query<{ job_id: string; status: JobStatus; status_changed_at: Date } & { [K in keyof PhaseRow]: PhaseRow[K] | null }>(
    `SELECT j.id AS job_id, j.status, j.status_changed_at, r.*
       FROM jobs j
       LEFT JOIN LATERAL (
         SELECT ${ROW_COLUMNS} FROM job_phases p JOIN assignments a ON a.id = p.assignment_id
          WHERE p.job_id = j.id ORDER BY p.matched_at DESC, a.attempt DESC LIMIT 1
       ) r ON true
      WHERE j.id = ANY($1)`,
    [[...jobIds]],
  );
  return new Map(
    rows.map((r) => [r.job_id, { status: r.status, statusChangedAt: r.status_changed_at, run: r.assignment_id === null ? null : runOf(r as PhaseRow) }]),
  );
}

/** p50 and p95 in milliseconds (null without a sample), and how many samples. */
export interface MsPercentiles {
  runs: number;
  p50: number | null;
  p95: number | null;
}

/**
 * A machine's start figures over its latest `limit` offers since `since` that reached running:
 * from the offer to running, and from the offer to the job's first own line (runs without one
 * are left out of that figure). Offers, not queue entries: the wait in the queue is the
 * market's, not the machine's.
 */
export async function machineStartFigures(db: Queryable, machineId: string, params: { since: Date; limit: number }): Promise<{ toRunning: MsPercentiles; toFirstLog: MsPercentiles }> {
  const [row] = await db.query<{ runs: number; running_p50: number | null; running_p95: number | null; logged: number; log_p50: number | null; log_p95: number | null }>(
    `SELECT count(*)::int AS runs,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY to_running) AS running_p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY to_running) AS running_p95,
            count(to_first_log)::int AS logged,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY to_first_log) AS log_p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY to_first_log) AS log_p95
       FROM (SELECT extract(epoch FROM greatest(running_at, matched_at) - matched_at)::float8 * 1000 AS to_running,
                    -- greatest() skips nulls: a run without a line has no figure, not its running time.
                    CASE WHEN first_log_at IS NOT NULL THEN extract(epoch FROM greatest(first_log_at, running_at, matched_at) - matched_at)::float8 * 1000 END AS to_first_log
               FROM job_phases
              WHERE machine_id = $1 AND matched_at >= $2 AND running_at IS NOT NULL
              ORDER BY matched_at DESC LIMIT $3) x`,
    [machineId, params.since, params.limit],
  );
  const ms = (v: number | null) => (v === null ? null : Math.round(Number(v)));
  return {
    toRunning: { runs: row?.runs ?? 0, p50: ms(row?.running_p50 ?? null), p95: ms(row?.running_p95 ?? null) },
    toFirstLog: { runs: row?.logged ?? 0, p50: ms(row?.log_p50 ?? null), p95: ms(row?.log_p95 ?? null) },
  };
}
