import type { AssignmentOutputNote, AssignmentStatusMessage } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import type { MachineStanding } from './verification.js';

/** An assignment row as the lifecycle reads it. */
export interface AssignmentRow {
  id: string;
  job_id: string;
  machine_id: string;
  attempt: number;
  state: 'offered' | 'accepted' | 'running' | 'finished' | 'failed' | 'rejected' | 'lost' | 'canceled';
  agent_state: string | null;
  gpu_indices: number[];
  class_id: string;
  gpu_model: string;
  price_per_gpu_hour_micro_usd: number;
  spec: { command: string[]; image: string; imageDigest: string | null; outputRules?: Array<{ path: string; maxBytes: number }> };
  /** When the server received the start (billing's clock; the machine's own in `reported_started_at`). */
  started_at: Date | null;
  /** When the server received the first report that the container ended, or ended the run itself. */
  finished_at: Date | null;
  reported_started_at: Date | null;
  reported_finished_at: Date | null;
  exit_code: number | null;
  oom_killed: boolean | null;
  timed_out: boolean | null;
  image_digest: string | null;
  outputs: Array<{ path: string; name?: string; sha256: string; sizeBytes: number }> | null;
  /** The `finished` report's `outputNotes` (protocol 5); null from older agents. */
  output_notes: AssignmentOutputNote[] | null;
  log_report: { sha256: string; sizeBytes: number } | null;
  record_json: string | null;
  record_signature: string | null;
}

const ASSIGNMENT_COLUMNS = `id, job_id, machine_id, attempt, state, agent_state, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec,
  started_at, finished_at, reported_started_at, reported_finished_at, exit_code, oom_killed, timed_out, image_digest, outputs, output_notes, log_report, record_json, record_signature`;

export const LIVE_STATES = ['offered', 'accepted', 'running'] as const;

export async function findAssignment(db: Queryable, id: string): Promise<AssignmentRow | null> {
  const [row] = await db.query<AssignmentRow>(`SELECT ${ASSIGNMENT_COLUMNS} FROM assignments WHERE id = $1`, [id]);
  return row ?? null;
}

/**
 * Moves a live assignment of `machineId` (any machine when null) from one of `from` to `to`
 * and sets `set` columns; null when it was not in such a state (another writer, or not its machine).
 * A move out of the live states records when (`ended_at`, the database's clock).
 */
export async function moveAssignment(
  db: Queryable,
  params: { id: string; machineId: string | null; from: readonly AssignmentRow['state'][]; to: AssignmentRow['state']; set?: Record<string, string | number | boolean | null | Date> },
): Promise<AssignmentRow | null> {
  const entries = Object.entries(params.set ?? {});
  const sets = entries.map(([column, ], i) => `${column} = $${i + 6}`);
  const [row] = await db.query<AssignmentRow>(
    `UPDATE assignments SET state = $3, updated_at = now(),
            ended_at = CASE WHEN $3 = ANY($5) THEN ended_at ELSE COALESCE(ended_at, now()) END${sets.length ? `, ${sets.join(', ')}` : ''}
      WHERE id = $1 AND ($2::text IS NULL OR machine_id = $2) AND state = ANY($4)
      RETURNING ${ASSIGNMENT_COLUMNS}`,
    [params.id, params.machineId, params.to, [...params.from], [...LIVE_STATES], ...entries.map(([, v]) => v)],
  );
  return row ?? null;
}

export async function excludeMachine(db: Queryable, jobId: string, machineId: string, reason: string): Promise<void> {
  await db.query('INSERT INTO job_exclusions (job_id, machine_id, reason) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [jobId, machineId, reason]);
}

/** The machine facts verification and settlement need. */
export interface MachineFacts {
  id: string;
  public_key_pem: string | null;
  payout_address: string | null;
  farm_slug: string;
  farm_name: string;
  region_key: string;
}

export async function findMachineFacts(db: Queryable, machineId: string): Promise<MachineFacts | null> {
  const [row] = await db.query<MachineFacts>(
    `SELECT m.id, m.public_key_pem, f.payout_address, f.slug AS farm_slug, f.name AS farm_name, m.region_key
       FROM machines m JOIN farms f ON f.id = m.farm_id WHERE m.id = $1`,
    [machineId],
  );
  return row ?? null;
}

/**
 * The machine's standing behind an assignment's execution record: simulated or not, and whether
 * its GPU verification was in place before the assignment was offered and is still in place
 * (a change of driver or GPUs unverifies it, and no canary runs while a job holds a GPU).
 */
export async function findMachineStanding(db: Queryable, assignmentId: string): Promise<MachineStanding | null> {
  const [row] = await db.query<MachineStanding>(
    `SELECT m.simulated, m.verification, (m.verification = 'verified' AND m.verified_at IS NOT NULL AND m.verified_at <= a.offered_at) AS "verifiedThroughout"
       FROM assignments a JOIN machines m ON m.id = a.machine_id WHERE a.id = $1`,
    [assignmentId],
  );
  return row ?? null;
}

/** Finished on the machine but not settled yet (the chain was down): the worker settles them. */
export async function listUnsettledFinished(db: Queryable, limit: number): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `SELECT id FROM assignments WHERE state = 'running' AND agent_state = 'finished' AND updated_at < now() - interval '5 seconds' ORDER BY updated_at LIMIT $1`,
    [limit],
  );
  return rows.map((r) => r.id);
}

/**
 * Moves the agent's reported state forward only, by `ranks` (a state not ranked counts 0), so a
 * report repeated after a restart changes nothing. True when it moved.
 */
export async function advanceAgentState(db: Queryable, assignmentId: string, state: string, ranks: Readonly<Record<string, number>>): Promise<boolean> {
  const [advanced] = await db.query<{ id: string }>(
    `UPDATE assignments SET agent_state = $2, updated_at = now()
      WHERE id = $1 AND (agent_state IS NULL OR $3 > (CASE agent_state ${Object.entries(ranks).map(([s, r]) => `WHEN '${s}' THEN ${r}`).join(' ')} ELSE 0 END))
      RETURNING id`,
    [assignmentId, state, ranks[state] ?? 0],
  );
  return advanced !== undefined;
}

/**
 * A report that the running assignment's container ended (`exited`, `uploading` or `finished`):
 * the first one received sets `finished_at` to `receivedAt` (the server's clock); the machine's
 * own start and finish, when the report has them, are kept in `reported_*`.
 */
export async function recordRunEnded(
  db: Queryable,
  assignmentId: string,
  params: { receivedAt: Date; reportedStartedAt: Date | null; reportedFinishedAt: Date | null },
): Promise<void> {
  await db.query(
    `UPDATE assignments SET finished_at = COALESCE(finished_at, $2), reported_started_at = COALESCE($3, reported_started_at),
            reported_finished_at = COALESCE($4, reported_finished_at), updated_at = now()
      WHERE id = $1 AND state = 'running'`,
    [assignmentId, params.receivedAt, params.reportedStartedAt, params.reportedFinishedAt],
  );
}

/** The facts of a `finished` report, kept on the running assignment for settlement (its times: `recordRunEnded`). */
export async function recordFinishReport(db: Queryable, assignmentId: string, message: AssignmentStatusMessage): Promise<void> {
  await db.query(
    `UPDATE assignments SET exit_code = $2, oom_killed = $3, timed_out = $4,
            image_digest = COALESCE($5, image_digest), outputs = $6::jsonb, log_report = $7::jsonb, record_json = $8, record_signature = $9,
            last_log_seq = $10, output_notes = $11::jsonb, updated_at = now()
      WHERE id = $1 AND state = 'running'`,
    [
      assignmentId,
      message.exitCode,
      message.oomKilled,
      message.timedOut,
      message.imageDigest,
      JSON.stringify(message.outputs ?? []),
      message.log ? JSON.stringify(message.log) : null,
      message.record?.json ?? null,
      message.record?.signature ?? null,
      message.lastLogSeq,
      message.outputNotes ? JSON.stringify(message.outputNotes) : null,
    ],
  );
}

/** Runs of the job that ended without a result (failed or lost). */
export async function countEndedRuns(db: Queryable, jobId: string): Promise<number> {
  const [row] = await db.query<{ attempts: number }>(`SELECT count(*)::int AS attempts FROM assignments WHERE job_id = $1 AND state IN ('failed', 'lost')`, [jobId]);
  return row?.attempts ?? 0;
}

/** Cancels the job's live assignments; returns them with their machines. */
export async function cancelLiveAssignments(db: Queryable, jobId: string): Promise<Array<{ id: string; machine_id: string }>> {
  return db.query<{ id: string; machine_id: string }>(
    `UPDATE assignments SET state = 'canceled', updated_at = now(), ended_at = now() WHERE job_id = $1 AND state = ANY($2) RETURNING id, machine_id`,
    [jobId, [...LIVE_STATES]],
  );
}
