import { ApiError, fieldDetail, type OutputFileList } from '@gpufarm/shared';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import type { Database, Queryable } from '../db/database.js';
import { numericParam, parseParams } from '../http/parse.js';
import type { BlobStore } from './blob-store.js';
import { goneError, isExpired } from './metadata.js';
import { attachmentDisposition, openOutputFile } from './output-index.js';
import { findOutputFile, findOutputFileList } from './output-index-store.js';
import { findArtifact, type ArtifactRow } from './store.js';

/**
 * What the file-list routes share: `GET /v1/artifacts/:id/files[/:index]` (artifacts:read) and
 * the dashboard's `GET /dashboard/api/jobs/:id/output/files[/:index]` (the job's result output).
 */

/** A file's `index` in its list, as a path parameter (a number in decimal). */
export const fileIndexParams = z.object({
  index: numericParam(z.string().regex(/^(0|[1-9]\d{0,8})$/, 'must be a file index from the list (0, 1, …)'), { type: 'integer', minimum: 0, maximum: 999_999_999, description: 'The file\'s index in the list' }),
});

/** The account's unexpired artifact `id`, or the spec's `not_found` / `gone`. */
export async function requireLiveArtifact(db: Queryable, accountId: string, id: string): Promise<ArtifactRow> {
  const row = await findArtifact(db, accountId, id);
  if (!row) throw new ApiError('not_found', `No artifact ${id} on this account.`);
  if (isExpired(row)) throw goneError(row);
  return row;
}

/**
 * The output the job's result names (the tar whose hash went on chain), unexpired; `not_found`
 * while the job has none (not finished, or nothing stored).
 */
export async function requireJobOutput(db: Queryable, job: { id: string; account_id: string; output_artifact_id: string | null; server_hash: string | null }): Promise<ArtifactRow> {
  const row = job.output_artifact_id ? await findArtifact(db, job.account_id, job.output_artifact_id) : null;
  if (!row || row.sha256 !== job.server_hash) throw new ApiError('not_found', `The job ${job.id} has no stored output${job.server_hash === null ? ' (yet)' : ''}.`);
  if (isExpired(row)) throw goneError(row);
  return row;
}

/** The file list of an output artifact; `not_found` for one without (an input, a log, not indexed). */
export async function requireOutputFileList(db: Queryable, row: ArtifactRow): Promise<OutputFileList> {
  const list = row.kind === 'output' ? await findOutputFileList(db, row) : null;
  if (!list) throw new ApiError('not_found', `The artifact ${row.id} has no file list: only a job's output tar is listed, once its run is settled.`);
  return list;
}

/**
 * Sends file `params.index` of the output `row`, read out of the stored tar and checked
 * against its indexed SHA-256 as it goes (`openOutputFile`): its hash in `X-Artifact-Sha256`,
 * its base name as the attachment's name. The whole file only (no ranges).
 */
export async function sendOutputFile(reply: FastifyReply, deps: { db: Database; blobs: BlobStore }, row: ArtifactRow, params: unknown): Promise<FastifyReply> {
  const index = Number(parseParams(fileIndexParams, params).index);
  const file = row.kind === 'output' ? await findOutputFile(deps.db, row, index) : null;
  if (!file) throw new ApiError('not_found', `The artifact ${row.id} lists no file ${index}.`, { details: [fieldDetail('index', 'is not in the file list', { subject: true })] });
  if (!(await deps.blobs.stat(row.sha256))) throw new ApiError('unavailable', 'The artifact storage does not have these bytes right now. Retry later.');
  reply.header('Content-Type', 'application/octet-stream');
  reply.header('Content-Disposition', attachmentDisposition(file.path));
  reply.header('Content-Length', String(file.sizeBytes));
  reply.header('X-Artifact-Sha256', file.sha256);
  reply.header('X-Artifact-Size', String(file.sizeBytes));
  reply.header('Cache-Control', 'private, no-store, no-transform');
  return reply.send(openOutputFile(deps.blobs, row.sha256, file));
}
