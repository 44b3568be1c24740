import type { OutputFileList } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';
import type { ArtifactRow } from './store.js';

/** The file lists of output tars (`output_indexes`, `output_index_files`; see output-index.ts). */

/** A file of the tar as indexed: `dataOffset` is where its bytes start in the tar. */
export interface TarFile {
  path: string;
  sizeBytes: number;
  sha256: string;
  dataOffset: number;
}

export interface TarIndex {
  /** The SHA-256 of the bytes read, all of them. */
  tarSha256: string;
  state: 'indexed' | 'unreadable';
  reason: string | null;
  /** The first `maxFiles` regular files with safe names, in tar order. */
  files: TarFile[];
  fileCount: number;
  skipped: { links: number; other: number; unsafeNames: number };
}

/** The index of an artifact as stored, without its files. */
interface IndexRow {
  artifact_id: string;
  tar_sha256: string;
  state: 'indexed' | 'unreadable';
  reason: string | null;
  file_count: number;
  skipped_links: number;
  skipped_other: number;
  skipped_unsafe_names: number;
  indexed_at: Date;
}

/** Replaces the stored index of `artifactId` by `index` (one transaction). */
export async function saveOutputIndex(db: Database, artifactId: string, index: TarIndex): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('DELETE FROM output_indexes WHERE artifact_id = $1', [artifactId]);
    await tx.query(
      `INSERT INTO output_indexes (artifact_id, tar_sha256, state, reason, file_count, skipped_links, skipped_other, skipped_unsafe_names)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [artifactId, index.tarSha256, index.state, index.reason, index.fileCount, index.skipped.links, index.skipped.other, index.skipped.unsafeNames],
    );
    if (index.files.length === 0) return;
    await tx.query(
      `INSERT INTO output_index_files (artifact_id, ordinal, path, size_bytes, sha256, data_offset)
       SELECT $1, f.ordinal - 1, f.path, f.size_bytes, f.sha256, f.data_offset
         FROM unnest($2::text[], $3::bigint[], $4::text[], $5::bigint[]) WITH ORDINALITY AS f(path, size_bytes, sha256, data_offset, ordinal)`,
      [artifactId, index.files.map((f) => f.path), index.files.map((f) => f.sizeBytes), index.files.map((f) => f.sha256), index.files.map((f) => f.dataOffset)],
    );
  });
}

/** The SHA-256 of the bytes the stored index of `artifactId` was made from, or null. */
export async function indexedTarSha256(db: Queryable, artifactId: string): Promise<string | null> {
  const [row] = await db.query<{ tar_sha256: string }>('SELECT tar_sha256 FROM output_indexes WHERE artifact_id = $1', [artifactId]);
  return row?.tar_sha256 ?? null;
}

/**
 * The file list of an output artifact for the routes, or null when it has none (not an
 * output, not indexed, or indexed from bytes the row no longer holds).
 */
export async function findOutputFileList(db: Queryable, artifact: Pick<ArtifactRow, 'id' | 'sha256' | 'job_id'>): Promise<OutputFileList | null> {
  const [index] = await db.query<IndexRow>('SELECT * FROM output_indexes WHERE artifact_id = $1 AND tar_sha256 = $2', [artifact.id, artifact.sha256]);
  if (!index) return null;
  const files = await db.query<{ ordinal: number; path: string; size_bytes: string | number; sha256: string }>(
    'SELECT ordinal, path, size_bytes, sha256 FROM output_index_files WHERE artifact_id = $1 ORDER BY ordinal',
    [artifact.id],
  );
  return {
    object: 'output_files',
    artifactId: artifact.id,
    jobId: artifact.job_id,
    tarSha256: index.tar_sha256,
    state: index.state,
    reason: index.reason,
    files: files.map((f) => ({ index: f.ordinal, path: f.path, sizeBytes: Number(f.size_bytes), sha256: f.sha256 })),
    fileCount: index.file_count,
    skipped: { links: index.skipped_links, other: index.skipped_other, unsafeNames: index.skipped_unsafe_names },
    indexedAt: index.indexed_at.toISOString(),
  };
}

/** One listed file of an artifact's index made from the bytes it holds now, or null. */
export async function findOutputFile(db: Queryable, artifact: Pick<ArtifactRow, 'id' | 'sha256'>, ordinal: number): Promise<TarFile | null> {
  const [file] = await db.query<{ path: string; size_bytes: string | number; sha256: string; data_offset: string | number }>(
    `SELECT f.path, f.size_bytes, f.sha256, f.data_offset
       FROM output_index_files f JOIN output_indexes i ON i.artifact_id = f.artifact_id
      WHERE f.artifact_id = $1 AND f.ordinal = $2 AND i.tar_sha256 = $3 AND i.state = 'indexed'`,
    [artifact.id, ordinal, artifact.sha256],
  );
  return file ? { path: file.path, sizeBytes: Number(file.size_bytes), sha256: file.sha256, dataOffset: Number(file.data_offset) } : null;
}
