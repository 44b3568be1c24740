import type { ArtifactKind, ArtifactSummary } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';

/**
 * Artifact rows: one per use of stored bytes (the bytes themselves live once per SHA-256 in
 * the BlobStore). A row stays after it expires, so a download can say `gone`; the expiry
 * sweep deletes only the bytes.
 */

export interface ArtifactRow {
  id: string;
  account_id: string;
  job_id: string | null;
  assignment_id: string | null;
  kind: ArtifactKind;
  name: string | null;
  filename: string;
  size_bytes: number;
  sha256: string;
  declared_sha256: string | null;
  created_at: Date;
  expires_at: Date;
}

export interface NewArtifact {
  id: string;
  accountId: string;
  jobId: string | null;
  assignmentId: string | null;
  kind: ArtifactKind;
  name: string | null;
  filename: string;
  sizeBytes: number;
  sha256: string;
  declaredSha256: string | null;
  /** The row expires this many days after it is written. */
  ttlDays: number;
}

const COLUMNS = 'id, account_id, job_id, assignment_id, kind, name, filename, size_bytes, sha256, declared_sha256, created_at, expires_at';

const params = (a: NewArtifact) => [a.id, a.accountId, a.jobId, a.assignmentId, a.kind, a.name, a.filename, a.sizeBytes, a.sha256, a.declaredSha256, a.ttlDays];

/** Inserts an artifact row (a customer's input upload). */
export async function insertArtifact(db: Queryable, artifact: NewArtifact): Promise<ArtifactRow> {
  const [row] = await db.query<ArtifactRow>(
    `INSERT INTO artifacts (id, account_id, job_id, assignment_id, kind, name, filename, size_bytes, sha256, declared_sha256, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + make_interval(days => $11::int))
     RETURNING ${COLUMNS}`,
    params(artifact),
  );
  return row!;
}

/** Bytes of unexpired input uploads the account keeps stored (its quota counts these). */
export async function storedInputBytes(db: Queryable, accountId: string): Promise<number> {
  const [row] = await db.query<{ bytes: string | number | bigint }>(
    "SELECT coalesce(sum(size_bytes), 0) AS bytes FROM artifacts WHERE account_id = $1 AND kind = 'input' AND expires_at > now()",
    [accountId],
  );
  return Number(row!.bytes);
}

/**
 * Inserts an input row when the account's stored inputs stay within `quotaBytes` with it; null
 * when they would not. Uploads of one account are counted one at a time (an advisory lock on
 * the account), so two at once cannot both slip under the quota.
 */
export async function insertInputWithinQuota(db: Database, artifact: NewArtifact, quotaBytes: number): Promise<ArtifactRow | null> {
  return db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('input_quota:' || $1, 0))", [artifact.accountId]);
    if ((await storedInputBytes(tx, artifact.accountId)) + artifact.sizeBytes > quotaBytes) return null;
    return insertArtifact(tx, artifact);
  });
}

/**
 * Stores an agent's upload of `name` for its assignment; an upload of the same name again (a
 * retry) replaces the row's bytes and dates and keeps its id. `replacedSha256` is the hash the
 * row held before, when it held other bytes (they may now be unreferenced).
 */
export async function upsertAssignmentArtifact(db: Queryable, artifact: NewArtifact & { assignmentId: string; name: string }): Promise<{ row: ArtifactRow; replacedSha256: string | null }> {
  const [row] = await db.query<ArtifactRow & { replaced_sha256: string | null }>(
    `WITH old AS (SELECT sha256 FROM artifacts WHERE assignment_id = $4 AND name = $6)
     INSERT INTO artifacts AS a (id, account_id, job_id, assignment_id, kind, name, filename, size_bytes, sha256, declared_sha256, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + make_interval(days => $11::int))
     ON CONFLICT (assignment_id, name) WHERE assignment_id IS NOT NULL DO UPDATE
       SET filename = EXCLUDED.filename, size_bytes = EXCLUDED.size_bytes, sha256 = EXCLUDED.sha256,
           declared_sha256 = EXCLUDED.declared_sha256, created_at = now(), expires_at = EXCLUDED.expires_at
     RETURNING ${COLUMNS.split(', ').map((c) => `a.${c}`).join(', ')}, (SELECT sha256 FROM old) AS replaced_sha256`,
    params(artifact),
  );
  const { replaced_sha256, ...stored } = row!;
  return { row: stored, replacedSha256: replaced_sha256 !== null && replaced_sha256 !== stored.sha256 ? replaced_sha256 : null };
}

/** An artifact of `accountId` (expired ones included), or null: another account's is never found. */
export async function findArtifact(db: Queryable, accountId: string, id: string): Promise<ArtifactRow | null> {
  const [row] = await db.query<ArtifactRow>(`SELECT ${COLUMNS} FROM artifacts WHERE id = $1 AND account_id = $2`, [id, accountId]);
  return row ?? null;
}

/** Any account's artifact, for a signed URL (the signature is the credential). */
export async function findArtifactById(db: Queryable, id: string): Promise<ArtifactRow | null> {
  const [row] = await db.query<ArtifactRow>(`SELECT ${COLUMNS} FROM artifacts WHERE id = $1`, [id]);
  return row ?? null;
}

/** Artifacts of `accountId` among `ids` (expired ones included). */
export async function findArtifacts(db: Queryable, accountId: string, ids: readonly string[]): Promise<ArtifactRow[]> {
  if (ids.length === 0) return [];
  return db.query<ArtifactRow>(`SELECT ${COLUMNS} FROM artifacts WHERE id = ANY($1) AND account_id = $2`, [ids, accountId]);
}

/** The artifact an assignment uploaded as `name` (`output-0`, `log`), or null. */
export async function findAssignmentArtifact(db: Queryable, assignmentId: string, name: string): Promise<ArtifactRow | null> {
  const [row] = await db.query<ArtifactRow>(`SELECT ${COLUMNS} FROM artifacts WHERE assignment_id = $1 AND name = $2`, [assignmentId, name]);
  return row ?? null;
}

/** What an assignment uploaded, by upload name (`output-0`, `log`). */
export async function listAssignmentArtifacts(db: Queryable, assignmentId: string): Promise<Map<string, ArtifactRow>> {
  const rows = await db.query<ArtifactRow>(`SELECT ${COLUMNS} FROM artifacts WHERE assignment_id = $1`, [assignmentId]);
  return new Map(rows.map((r) => [r.name ?? r.id, r]));
}

/**
 * The `artifacts` array of each job (one statement for any number of jobs): the outputs and logs
 * of every run of the job, run by run, outputs in rule order, then the log.
 */
export async function listJobsArtifacts(db: Queryable, jobIds: readonly string[]): Promise<Map<string, ArtifactSummary[]>> {
  const out = new Map<string, ArtifactSummary[]>(jobIds.map((id) => [id, []]));
  if (jobIds.length === 0) return out;
  const rows = await db.query<{ job_id: string; id: string; kind: ArtifactKind; filename: string; size_bytes: number; sha256: string }>(
    `SELECT a.job_id, a.id, a.kind, a.filename, a.size_bytes, a.sha256
       FROM artifacts a LEFT JOIN assignments s ON s.id = a.assignment_id
      WHERE a.job_id = ANY($1) AND a.kind IN ('output', 'log')
      ORDER BY s.attempt, s.offered_at, CASE a.kind WHEN 'output' THEN 0 ELSE 1 END, length(a.name), a.name, a.id`,
    [jobIds],
  );
  for (const r of rows) out.get(r.job_id)?.push({ id: r.id, kind: r.kind, filename: r.filename, sizeBytes: Number(r.size_bytes), sha256: r.sha256 });
  return out;
}

/**
 * SHA-256s of expired artifacts that no unexpired row references any more, after `afterSha256`
 * in order (keyset pages for the sweep).
 */
export async function listUnreferencedExpiredSha256s(db: Queryable, params: { now: Date; afterSha256: string; limit: number }): Promise<string[]> {
  const rows = await db.query<{ sha256: string }>(
    `SELECT DISTINCT e.sha256 FROM artifacts e
      WHERE e.expires_at <= $1 AND e.sha256 > $2
        AND NOT EXISTS (SELECT 1 FROM artifacts l WHERE l.sha256 = e.sha256 AND l.expires_at > $1)
      ORDER BY e.sha256 LIMIT $3`,
    [params.now, params.afterSha256, params.limit],
  );
  return rows.map((r) => r.sha256);
}

/** Whether any unexpired row references `sha256`. */
export async function isSha256Referenced(db: Queryable, sha256: string, now: Date): Promise<boolean> {
  const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts WHERE sha256 = $1 AND expires_at > $2', [sha256, now]);
  return (row?.n ?? 0) > 0;
}

/** An assignment as the agent's upload and input routes check it, with its job's account. */
export interface UploadTarget {
  id: string;
  job_id: string;
  machine_id: string;
  state: string;
  spec: unknown;
  finished_at: Date | null;
  updated_at: Date;
  account_id: string;
}

export async function findUploadTarget(db: Queryable, assignmentId: string): Promise<UploadTarget | null> {
  const [target] = await db.query<UploadTarget>(
    `SELECT a.id, a.job_id, a.machine_id, a.state, a.spec, a.finished_at, a.updated_at, j.account_id
       FROM assignments a JOIN jobs j ON j.id = a.job_id WHERE a.id = $1`,
    [assignmentId],
  );
  return target ?? null;
}
