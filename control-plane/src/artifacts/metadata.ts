import { ApiError, type ArtifactMetadata } from '@gpufarm/shared';
import { randomId } from '../ids.js';
import type { BlobStore } from './blob-store.js';
import type { UrlSigner } from './signing.js';
import type { ArtifactRow } from './store.js';

/** The spec's signed artifact URL lifetime (Limits). */
export const SIGNED_URL_TTL_SECONDS = 120;

/** Artifact ids: `art_` and 26 random base-32 characters (they reveal nothing, not even a time). */
export const ARTIFACT_ID = /^art_[0-9a-z]{26}$/;

export function newArtifactId(): string {
  return randomId('art');
}

/** A URL that reads an artifact's bytes for `ttlSeconds`, and when it expires. */
export interface ArtifactLink {
  url: string;
  expiresAt: Date;
}

/**
 * Where the bytes of `row` are read for `ttlSeconds`: the store's own presigned URL when it has
 * one (the bytes then do not pass through the control plane), else our signed `/files/<id>`.
 */
export async function artifactLink(row: ArtifactRow, deps: { blobs: BlobStore; signer: UrlSigner }, ttlSeconds: number, now = Date.now()): Promise<ArtifactLink> {
  if (deps.blobs.presign) return deps.blobs.presign(row.sha256, { filename: row.filename, ttlSeconds, now });
  return deps.signer.sign(row.id, ttlSeconds, now);
}

/** `GET /v1/artifacts/:id?format=json` and `POST /v1/artifacts`: the row and a fresh URL of its bytes (`artifactLink`). */
export function toArtifactMetadata(row: ArtifactRow, signed: ArtifactLink): ArtifactMetadata {
  return {
    object: 'artifact',
    id: row.id,
    kind: row.kind,
    filename: row.filename,
    sizeBytes: Number(row.size_bytes),
    sha256: row.sha256,
    jobId: row.job_id,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    url: signed.url,
    urlExpiresAt: signed.expiresAt.toISOString(),
  };
}

/** Whether an artifact row has expired at `now` (epoch ms). */
export function isExpired(row: Pick<ArtifactRow, 'expires_at'>, now = Date.now()): boolean {
  return row.expires_at.getTime() <= now;
}

/** The spec's `gone` for an expired artifact row. */
export function goneError(row: Pick<ArtifactRow, 'id' | 'expires_at'>): ApiError {
  return new ApiError('gone', `The artifact ${row.id} expired at ${row.expires_at.toISOString()}; its bytes are no longer kept.`);
}
