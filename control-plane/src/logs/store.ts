import type { LogBatchLine, LogStream } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { addJobLogBytes, capJobLog, findJobLogUsage, takeServiceLogSeq } from '../jobs/store.js';

/**
 * Log lines of jobs: each (assignment, seq) stored once, `id` the only-growing public cursor.
 * Partitioned by day of the job's creation (`job_created_at`), which retention drops whole
 * (`logs/partitions.ts`).
 * The agent's lines carry its assignment id and seq; the service's own `system` lines (queued,
 * matched, verified…) use the job id as their assignment id and a per-job counter as seq.
 */

export interface LogLineRow {
  id: number;
  assignment_id: string;
  seq: number;
  stream: LogStream;
  line: string;
  at: Date;
}

/** The per-job cap's own system line (written once, when the cap is first reached). */
export const LOG_CAP_LINE = (capBytes: number) =>
  `log limit reached: this job's logs passed ${capBytes} bytes; later lines are not stored (the log artifact keeps the first and the last part of the log)`;

/**
 * Stores a batch of the agent's lines for `assignmentId` of `jobId`; lines already stored are
 * skipped (a resend after a reconnect). Lines past the job's cap (`capBytes` of text) are
 * dropped, and the first time that happens a system line says so. Returns how many lines were
 * new and their bytes of text. The caller acks the batch's last seq: every line up to it is stored or deliberately dropped.
 */
export async function insertAgentLines(
  db: Queryable,
  params: { jobId: string; assignmentId: string; lines: readonly LogBatchLine[]; capBytes: number },
): Promise<{ inserted: number; bytes: number; capped: boolean }> {
  const job = await findJobLogUsage(db, params.jobId);
  if (!job) return { inserted: 0, bytes: 0, capped: false };
  if (job.log_capped) return { inserted: 0, bytes: 0, capped: true };
  let room = params.capBytes - Number(job.log_bytes);
  const kept: LogBatchLine[] = [];
  for (const line of params.lines) {
    const size = Buffer.byteLength(line.line, 'utf8');
    if (size > room) break;
    room -= size;
    kept.push(line);
  }
  const capped = kept.length < params.lines.length;
  let inserted = 0;
  let bytes = 0;
  if (kept.length > 0) {
    const rows = await db.query<{ bytes: number }>(
      `INSERT INTO log_lines (job_id, assignment_id, seq, stream, line, at, job_created_at)
       SELECT $1, $2, x.seq, x.stream, x.line, to_timestamp(x.at_ms / 1000.0), j.created_at
         FROM jsonb_to_recordset($3::jsonb) AS x(seq int, stream text, line text, at_ms float8)
         JOIN jobs j ON j.id = $1
        ORDER BY x.seq
       ON CONFLICT (assignment_id, seq, job_created_at) DO NOTHING
       RETURNING octet_length(line) AS bytes`,
      [params.jobId, params.assignmentId, JSON.stringify(kept.map((l) => ({ seq: l.seq, stream: l.stream, line: l.line, at_ms: l.atMs })))],
    );
    inserted = rows.length;
    bytes = rows.reduce((n, r) => n + Number(r.bytes), 0);
    if (bytes > 0) await addJobLogBytes(db, params.jobId, bytes);
  }
  if (capped) {
    if (await capJobLog(db, params.jobId)) await appendServiceLine(db, params.jobId, LOG_CAP_LINE(params.capBytes), { force: true });
  }
  return { inserted, bytes, capped };
}

/**
 * Appends one of the service's own `system` lines to a job's log (queued, matched, pulling…).
 * Not stored once the job's log is capped, except the cap's own line (`force`).
 */
export async function appendServiceLine(db: Queryable, jobId: string, line: string, options: { force?: boolean } = {}): Promise<void> {
  const seq = await takeServiceLogSeq(db, jobId, options.force ?? false);
  if (seq === null) return;
  await insertServiceLines(db, [{ jobId, seq, line }]);
}

/** Stores service lines whose seq the job's row gave out (`takeServiceLogSeq`, `moveMatchedJobs`), in one statement. */
export async function insertServiceLines(db: Queryable, lines: ReadonlyArray<{ jobId: string; seq: number; line: string }>): Promise<void> {
  if (lines.length === 0) return;
  await db.query(
    `INSERT INTO log_lines (job_id, assignment_id, seq, stream, line, at, job_created_at)
     SELECT x.job_id, x.job_id, x.seq, 'system', x.line, now(), j.created_at
       FROM jsonb_to_recordset($1::jsonb) AS x(job_id text, seq int, line text) JOIN jobs j ON j.id = x.job_id`,
    [JSON.stringify(lines.map((l) => ({ job_id: l.jobId, seq: l.seq, line: l.line })))],
  );
}

/** The highest seq stored for each assignment (null: none), for `welcome.acked`. */
export async function lastStoredSeqs(db: Queryable, assignmentIds: readonly string[]): Promise<Map<string, number>> {
  if (assignmentIds.length === 0) return new Map();
  const rows = await db.query<{ assignment_id: string; seq: number }>(
    'SELECT assignment_id, max(seq)::int AS seq FROM log_lines WHERE assignment_id = ANY($1) GROUP BY assignment_id',
    [assignmentIds],
  );
  return new Map(rows.map((r) => [r.assignment_id, r.seq]));
}

/** A page of a job's lines after cursor `afterId`, optionally of one stream, in id order. */
export async function listLogLines(db: Queryable, params: { jobId: string; afterId: number; limit: number; stream: LogStream | null }): Promise<LogLineRow[]> {
  return db.query<LogLineRow>(
    // The job's creation time is the partition key: the executor reads the one partition holding
    // the job's lines (or the default) rather than probing every day's index.
    `SELECT id, assignment_id, seq, stream, line, at FROM log_lines
      WHERE job_id = $1 AND id > $2 AND ($3::text IS NULL OR stream = $3)
        AND job_created_at = (SELECT created_at FROM jobs WHERE id = $1)
      ORDER BY id LIMIT $4`,
    [params.jobId, params.afterId, params.stream, params.limit],
  );
}

/** A job's last `limit` lines in id order, and how many it has in all (the admin's job page). */
export async function listLastLogLines(db: Queryable, params: { jobId: string; limit: number }): Promise<{ lines: LogLineRow[]; total: number }> {
  const where = `WHERE job_id = $1 AND job_created_at = (SELECT created_at FROM jobs WHERE id = $1)`;
  const [lines, [count]] = await Promise.all([
    db.query<LogLineRow>(`SELECT id, assignment_id, seq, stream, line, at FROM log_lines ${where} ORDER BY id DESC LIMIT $2`, [params.jobId, params.limit]),
    db.query<{ total: number }>(`SELECT count(*)::int AS total FROM log_lines ${where}`, [params.jobId]),
  ]);
  return { lines: lines.reverse(), total: count?.total ?? 0 };
}
