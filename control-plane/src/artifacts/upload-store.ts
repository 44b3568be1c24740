import type { Queryable } from '../db/database.js';

/**
 * Direct uploads under way (`artifact_uploads`): begun in the object store by the plan route,
 * claimed by their completion, and deleted once completed, refused or swept.
 */

export interface DirectUploadRow {
  id: string;
  assignment_id: string;
  name: string;
  object_key: string;
  store_upload_id: string;
  max_bytes: number;
  part_bytes: number;
  part_count: number;
  created_at: Date;
  expires_at: Date;
  claimed_at: Date | null;
}

const COLUMNS = 'id, assignment_id, name, object_key, store_upload_id, max_bytes, part_bytes, part_count, created_at, expires_at, claimed_at';

const numeric = (row: DirectUploadRow): DirectUploadRow => ({ ...row, max_bytes: Number(row.max_bytes), part_bytes: Number(row.part_bytes) });

export async function insertDirectUpload(
  db: Queryable,
  upload: { id: string; assignmentId: string; name: string; objectKey: string; storeUploadId: string; maxBytes: number; partBytes: number; partCount: number; expiresAt: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO artifact_uploads (id, assignment_id, name, object_key, store_upload_id, max_bytes, part_bytes, part_count, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [upload.id, upload.assignmentId, upload.name, upload.objectKey, upload.storeUploadId, upload.maxBytes, upload.partBytes, upload.partCount, upload.expiresAt],
  );
}

/**
 * Takes the upload `id` of `assignmentId`'s `name` for its completion, or null when there is no
 * such upload or another completion took it (one completion per upload, whichever replica).
 */
export async function claimDirectUpload(db: Queryable, params: { id: string; assignmentId: string; name: string }): Promise<DirectUploadRow | null> {
  const [row] = await db.query<DirectUploadRow>(
    `UPDATE artifact_uploads SET claimed_at = now()
      WHERE id = $1 AND assignment_id = $2 AND name = $3 AND claimed_at IS NULL
      RETURNING ${COLUMNS}`,
    [params.id, params.assignmentId, params.name],
  );
  return row ? numeric(row) : null;
}

export async function deleteDirectUpload(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM artifact_uploads WHERE id = $1', [id]);
}

/**
 * Removes and returns up to `limit` uploads that expired before `before`, claimed or not (a
 * completion that died midway leaves its claim): the sweep aborts them in the store.
 */
export async function takeExpiredDirectUploads(db: Queryable, params: { before: Date; limit: number }): Promise<DirectUploadRow[]> {
  const rows = await db.query<DirectUploadRow>(
    `DELETE FROM artifact_uploads WHERE id IN (
       SELECT id FROM artifact_uploads WHERE expires_at < $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING ${COLUMNS}`,
    [params.before, params.limit],
  );
  return rows.map(numeric);
}
