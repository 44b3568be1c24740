import { ApiError, fieldDetail } from '@gpufarm/shared';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ExecutionConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { parseParams, parseQuery } from '../http/parse.js';
import { BlobTooLargeError, type BlobStore } from './blob-store.js';
import { ARTIFACT_ID, artifactLink, goneError, isExpired, newArtifactId, SIGNED_URL_TTL_SECONDS, toArtifactMetadata } from './metadata.js';
import { parseRange } from './range.js';
import { deleteIfUnreferenced } from './expiry.js';
import { bodyStream, checkDeclaredLength, takeRawBodies, tooLarge } from './raw-body.js';
import type { UrlSigner } from './signing.js';
import { requireLiveArtifact, requireOutputFileList, sendOutputFile } from './output-files-routes.js';
import { findArtifactById, insertInputWithinQuota, storedInputBytes, type ArtifactRow } from './store.js';

export interface ArtifactRoutesOptions {
  db: Database;
  blobs: BlobStore;
  /** Signs and checks `/files/<id>` URLs (key from `deploymentSecret(db, 'artifact_url_key')`). */
  signer: UrlSigner;
  config: Pick<ExecutionConfig, 'artifactTtlDays' | 'maxInputBytes' | 'inputQuotaBytes'>;
  /**
   * false: only the customer routes (the dashboard's copy under `/dashboard/api`); the signed
   * URLs are `<publicUrl>/files/<id>`, served once, at the root.
   */
  signedFiles?: boolean;
}

/** Names an uploaded input may have: shell- and header-safe, like a mount name. */
export const INPUT_FILENAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/;
export const DEFAULT_INPUT_FILENAME = 'input.bin';

export const artifactParams = z.object({ id: z.string().regex(ARTIFACT_ID, 'is not an artifact id (art_…)') });
export const artifactQuery = z.strictObject({ format: z.enum(['json'], { error: 'must be json (or omitted for a redirect)' }).optional() });
export const uploadQuery = z.strictObject({
  filename: z.string().regex(INPUT_FILENAME, 'must be 1 to 255 letters, digits, dots, dashes or underscores, starting with a letter or digit').optional(),
});

/** Whether an Accept header asks for JSON (`application/json` with a non-zero q). */
export function acceptsJson(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(',').some((part) => {
    const [type = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    return type === 'application/json' && (q === undefined || Number(q.slice(2)) > 0);
  });
}

function integrityHeaders(reply: FastifyReply, row: ArtifactRow): void {
  reply.header('X-Artifact-Sha256', row.sha256);
  reply.header('X-Artifact-Size', String(row.size_bytes));
}

/**
 * Artifacts for customers: `GET /v1/artifacts/:id` (302 to a signed URL, the store's presigned
 * one when it has them, or metadata as JSON),
 * `GET /v1/artifacts/:id/files[/:index]` (an output tar's file list, and one file of it),
 * `POST /v1/artifacts` (a job input, streamed), and the signed URL itself, `GET|HEAD /files/:id`,
 * which needs no API key: the signature is the credential, for 120 seconds.
 */
export const artifactRoutes: FastifyPluginAsync<ArtifactRoutesOptions> = async (app, { db, blobs, signer, config, signedFiles = true }) => {
  takeRawBodies(app);

  app.get('/v1/artifacts/:id', { config: { auth: 'artifacts:read', rateBucket: 'artifact_download' } }, async (request, reply) => {
    const { id } = parseParams(artifactParams, request.params);
    const query = parseQuery(artifactQuery, request.query, 'GET /v1/artifacts/:id');
    const row = await requireLiveArtifact(db, request.principal!.accountId, id);
    const metadata = toArtifactMetadata(row, await artifactLink(row, { blobs, signer }, SIGNED_URL_TTL_SECONDS));
    integrityHeaders(reply, row);
    reply.header('Cache-Control', 'no-store');
    if (query.format === 'json' || acceptsJson(request.headers.accept)) return metadata;
    return reply.redirect(metadata.url, 302);
  });

  // An output tar's files as the server indexed them at settlement, and one file out of it (artifacts/output-index.ts).
  app.get('/v1/artifacts/:id/files', { config: { auth: 'artifacts:read' } }, async (request, reply) => {
    const { id } = parseParams(artifactParams, request.params);
    reply.header('Cache-Control', 'no-store');
    return requireOutputFileList(db, await requireLiveArtifact(db, request.principal!.accountId, id));
  });

  app.get('/v1/artifacts/:id/files/:index', { config: { auth: 'artifacts:read', rateBucket: 'artifact_download' } }, async (request, reply) => {
    const { id } = parseParams(artifactParams, request.params);
    return sendOutputFile(reply, { db, blobs }, await requireLiveArtifact(db, request.principal!.accountId, id), request.params);
  });

  app.post('/v1/artifacts', { config: { auth: 'jobs:create', rateBucket: 'input_upload' } }, async (request, reply) => {
    const query = parseQuery(uploadQuery, request.query, 'POST /v1/artifacts');
    const accountId = request.principal!.accountId;
    const left = config.inputQuotaBytes - (await storedInputBytes(db, accountId));
    const overQuota = () =>
      new ApiError('payload_too_large', `This upload would pass the account's input quota of ${config.inputQuotaBytes} bytes (${Math.max(0, left)} bytes left). Inputs count until they expire; upload less or wait.`, {
        details: [fieldDetail('body', `the account's stored inputs may total at most ${config.inputQuotaBytes} bytes`)],
        headers: { Connection: 'close' },
      });
    if (left <= 0) throw overQuota();
    const maxBytes = Math.min(config.maxInputBytes, left);
    const limitedBy = maxBytes < config.maxInputBytes ? overQuota : () => tooLarge(config.maxInputBytes, 'input upload');
    checkDeclaredLength(request, maxBytes, limitedBy);
    let stored: { sha256: string; sizeBytes: number };
    try {
      stored = await blobs.put(bodyStream(request.raw), { maxBytes });
    } catch (err) {
      if (err instanceof BlobTooLargeError) throw limitedBy();
      throw err;
    }
    const row = await insertInputWithinQuota(
      db,
      {
        id: newArtifactId(),
        accountId,
        jobId: null,
        assignmentId: null,
        kind: 'input',
        name: null,
        filename: query.filename ?? DEFAULT_INPUT_FILENAME,
        sizeBytes: stored.sizeBytes,
        sha256: stored.sha256,
        declaredSha256: null,
        ttlDays: config.artifactTtlDays,
      },
      config.inputQuotaBytes,
    );
    if (!row) {
      await deleteIfUnreferenced({ db, blobs }, stored.sha256);
      throw overQuota();
    }
    integrityHeaders(reply, row);
    return reply.code(201).send(toArtifactMetadata(row, await artifactLink(row, { blobs, signer }, SIGNED_URL_TTL_SECONDS)));
  });

  const serveFile = async (request: FastifyRequest, reply: FastifyReply, head: boolean) => {
    const { id } = request.params as { id: string };
    const { expires, sig } = request.query as { expires?: unknown; sig?: unknown };
    const verdict = signer.verify(id, typeof expires === 'string' ? expires : undefined, typeof sig === 'string' ? sig : undefined);
    if (verdict === 'invalid') throw new ApiError('forbidden', 'The signature of this artifact URL is invalid. Ask GET /v1/artifacts/:id for a new URL.');
    if (verdict === 'expired') throw new ApiError('forbidden', 'This artifact URL expired (they are valid for 120 seconds). Ask GET /v1/artifacts/:id for a new one.');
    const row = await findArtifactById(db, id);
    if (!row) throw new ApiError('not_found', `No artifact ${id}.`);
    if (isExpired(row)) throw goneError(row);
    const size = Number(row.size_bytes);
    if (!(await blobs.stat(row.sha256))) throw new ApiError('unavailable', 'The artifact storage does not have these bytes right now. Retry later.');
    const etag = `"${row.sha256}"`;
    reply.header('Content-Type', 'application/octet-stream');
    reply.header('Content-Disposition', `attachment; filename="${row.filename}"`);
    reply.header('ETag', etag);
    reply.header('Accept-Ranges', 'bytes');
    reply.header('Cache-Control', 'private, no-transform');
    integrityHeaders(reply, row);
    const ifRange = request.headers['if-range'];
    const range = ifRange !== undefined && ifRange !== etag ? ({ kind: 'full' } as const) : parseRange(request.headers.range, size);
    if (range.kind === 'unsatisfiable') {
      reply.header('Content-Range', `bytes */${size}`);
      return reply.code(416).header('Content-Length', '0').send();
    }
    if (range.kind === 'partial') {
      reply.code(206).header('Content-Range', `bytes ${range.start}-${range.end}/${size}`).header('Content-Length', String(range.end - range.start + 1));
      return reply.send(head ? undefined : blobs.open(row.sha256, { start: range.start, end: range.end }));
    }
    reply.header('Content-Length', String(size));
    if (head || size === 0) return reply.send();
    return reply.send(blobs.open(row.sha256));
  };

  if (!signedFiles) return;
  app.get('/files/:id', { exposeHeadRoute: false, config: { auth: 'signed_url' } }, (request, reply) => serveFile(request, reply, false));
  app.head('/files/:id', { config: { auth: 'signed_url' } }, (request, reply) => serveFile(request, reply, true));
};
