import type { ArtifactMetadata } from '@gpufarm/shared';
import { randomId } from '../ids.js';
import type { UrlSigner } from './signing.js';
import type { ArtifactRow } from './store.js';

/** The spec's signed artifact URL lifetime (Limits). */
export const SIGNED_URL_TTL_SECONDS = 120;

/** Artifact ids: `art_` and 26 random base-32 characters (they reveal nothing, not even a time). */
export const ARTIFACT_ID = /^art_[0-9a-z]{26}$/;

export function newArtifactId(): string {
  return randomId('art');
}

/** `GET /v1/artifacts/:id?format=json` and `POST /v1/artifacts`: the row and a fresh signed URL. */
export function toArtifactMetadata(row: ArtifactRow, signer: UrlSigner, now = Date.now()): ArtifactMetadata {
  const signed = signer.sign(row.id, SIGNED_URL_TTL_SECONDS, now);
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
