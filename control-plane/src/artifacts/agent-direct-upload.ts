import { ApiError, fieldDetail, uploadCompletionSchema, type UploadPlan } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { ExecutionConfig } from '../config.js';
import type { Database, Queryable } from '../db/database.js';
import { parseBody, parseParams } from '../http/parse.js';
import { randomId } from '../ids.js';
import { AGENT_UPLOAD_PATH, checkLateUpload, openUpload, recordUpload } from './agent-upload.js';
import { BlobTooLargeError, DirectUploadMismatchError, type BlobStore } from './blob-store.js';
import { tooLarge } from './raw-body.js';
import { claimDirectUpload, deleteDirectUpload, insertDirectUpload, takeExpiredDirectUploads } from './upload-store.js';

export interface AgentDirectUploadRoutesOptions {
  db: Database;
  blobs: BlobStore;
  config: Pick<ExecutionConfig, 'artifactTtlDays'>;
}

/** Where an agent asks how to upload (`ARTIFACT_UPLOADS_SUFFIX` of the shared protocol). */
export const AGENT_UPLOAD_PLAN_PATH = `${AGENT_UPLOAD_PATH}/uploads`;
/** Where it completes a direct upload. */
export const AGENT_UPLOAD_COMPLETE_PATH = `${AGENT_UPLOAD_PLAN_PATH}/:uploadId`;
/**
 * How long the part URLs of a plan work: 5 GiB, the largest output rule, at 2.5 MB/s (a 20
 * Mbit/s uplink) takes 35 minutes.
 */
export const DIRECT_UPLOAD_TTL_SECONDS = 2 * 60 * 60;
/** A completion may come this long after the part URLs expired (the last part went up in time). */
export const DIRECT_UPLOAD_COMPLETE_GRACE_MS = 15 * 60 * 1000;

const completeParams = z.object({ uploadId: z.string().regex(/^upl_[0-9a-z]{26}$/, 'is not an upload id (upl_…)') });

/**
 * `POST /agent/v1/assignments/:id/outputs/:name/uploads`: how the agent uploads this artifact.
 * A store without direct uploads (the filesystem) answers 200 `{method: 'put'}`: the agent PUTs
 * the bytes to the control plane. The S3 store answers 201 with a multipart plan: presigned
 * part URLs covering the artifact's limit and no more than one part past it, valid
 * DIRECT_UPLOAD_TTL_SECONDS.
 *
 * `POST /agent/v1/assignments/:id/outputs/:name/uploads/:uploadId`: the agent's parts are in
 * the store; it sends their ETags and its hash and size of the whole. The control plane
 * completes the upload, reads the object back and hashes it: equal to what the agent declared
 * (and within the limit), it is kept at its content key and the artifact row written (201, the
 * PUT's answer); otherwise the object is deleted and the upload refused (409 `conflict`, 413
 * `payload_too_large`), nothing kept. Each upload completes once. The assignment must take
 * uploads as for the PUT, and a late upload may only repeat the stored bytes.
 */
export const agentDirectUploadRoutes: FastifyPluginAsync<AgentDirectUploadRoutesOptions> = async (app, { db, blobs, config }) => {
  app.post(AGENT_UPLOAD_PLAN_PATH, { config: { auth: 'machine' } }, async (request, reply) => {
    const { target, name, maxBytes } = await openUpload(db, request);
    if (!blobs.direct) return reply.code(200).send({ method: 'put' } satisfies UploadPlan);
    const upload = await blobs.direct.begin({ maxBytes, ttlSeconds: DIRECT_UPLOAD_TTL_SECONDS });
    const id = randomId('upl');
    await insertDirectUpload(db, {
      id,
      assignmentId: target.id,
      name,
      objectKey: upload.key,
      storeUploadId: upload.storeUploadId,
      maxBytes,
      partBytes: upload.partBytes,
      partCount: upload.partUrls.length,
      expiresAt: upload.expiresAt,
    });
    const plan: UploadPlan = { method: 'multipart', uploadId: id, partBytes: upload.partBytes, maxBytes, partUrls: upload.partUrls, expiresAt: upload.expiresAt.toISOString() };
    return reply.code(201).send(plan);
  });

  app.post(AGENT_UPLOAD_COMPLETE_PATH, { config: { auth: 'machine' } }, async (request, reply) => {
    const { target, name, what } = await openUpload(db, request);
    const { uploadId } = parseParams(completeParams, request.params);
    const completion = parseBody(uploadCompletionSchema, request.body);
    const direct = blobs.direct;
    const row = await claimDirectUpload(db, { id: uploadId, assignmentId: target.id, name });
    if (!direct || !row) throw new ApiError('not_found', `No upload ${uploadId} of ${name} is under way for the assignment ${target.id}; ask for a new one.`);
    const upload = { key: row.object_key, storeUploadId: row.store_upload_id };
    let finishing = false;
    try {
      if (Date.now() > row.expires_at.getTime() + DIRECT_UPLOAD_COMPLETE_GRACE_MS) {
        throw new ApiError('conflict', `The upload ${uploadId} expired at ${row.expires_at.toISOString()}; ask for a new one.`, { details: [fieldDetail('uploadId', 'expired', { subject: true })] });
      }
      if (completion.sizeBytes > row.max_bytes) throw tooLarge(row.max_bytes, what);
      const numbers = completion.parts.map((p) => p.partNumber);
      if (numbers.length > row.part_count || numbers.some((n, i) => n !== i + 1)) {
        throw new ApiError('invalid_request', `The parts must be numbered 1 to at most ${row.part_count}, in order, each once.`, { details: [fieldDetail('parts', `must be parts 1 to at most ${row.part_count} in order`)] });
      }
      await checkLateUpload(db, target, name, completion.sha256);
      finishing = true;
      let stored: { sha256: string; sizeBytes: number };
      try {
        stored = await direct.finish(upload, { parts: completion.parts, maxBytes: row.max_bytes, expected: { sha256: completion.sha256, sizeBytes: completion.sizeBytes } });
      } catch (err) {
        if (err instanceof BlobTooLargeError) throw tooLarge(err.maxBytes, what);
        if (err instanceof DirectUploadMismatchError) {
          throw new ApiError('conflict', `The ${what} was refused and not kept: ${err.message}. The bytes in the store are not what was hashed; upload again.`, {
            details: [fieldDetail('sha256', err.stored.sha256 ? `the stored object hashes to ${err.stored.sha256}` : `the stored object is ${err.stored.sizeBytes} bytes`, { subject: true })],
          });
        }
        throw err;
      }
      return reply.code(201).send(await recordUpload({ db, blobs, config }, target, name, stored, completion.sha256));
    } catch (err) {
      // `finish` cleans up after itself; a refusal before it leaves the upload to drop here.
      if (!finishing) await direct.abort(upload);
      throw err;
    } finally {
      await deleteDirectUpload(db, row.id);
    }
  });
};

/**
 * Aborts the direct uploads whose completion never came (the agent died, or gave up): their
 * parts, and their object if a completion died midway, are deleted from the store. Safe to run
 * from several replicas at once (each upload is taken by one).
 *
 * @returns how many were aborted
 */
export async function sweepAbandonedUploads(deps: { db: Queryable; blobs: BlobStore; now?: () => Date }, options: { batch?: number } = {}): Promise<number> {
  const direct = deps.blobs.direct;
  if (!direct) return 0;
  const before = new Date((deps.now ?? (() => new Date()))().getTime() - DIRECT_UPLOAD_COMPLETE_GRACE_MS);
  const batch = options.batch ?? 100;
  let aborted = 0;
  for (;;) {
    const rows = await takeExpiredDirectUploads(deps.db, { before, limit: batch });
    for (const row of rows) await direct.abort({ key: row.object_key, storeUploadId: row.store_upload_id });
    aborted += rows.length;
    if (rows.length < batch) return aborted;
  }
}
