import type { Queryable } from '../db/database.js';
import type { BlobStore } from './blob-store.js';
import { isSha256Referenced, listUnreferencedExpiredSha256s } from './store.js';

export interface ExpirySweepDeps {
  db: Queryable;
  blobs: BlobStore;
  /** The clock (default: the wall clock). */
  now?: () => Date;
}

/**
 * A blob written this recently is never deleted by the sweep: an upload of the same bytes may
 * have stored them and not yet written its row.
 */
export const FRESH_BLOB_GRACE_MS = 60 * 60 * 1000;

/**
 * Deletes the bytes of expired artifacts that no unexpired artifact shares (equal bytes are
 * stored once, so another job's or account's live artifact keeps them). Rows stay: a download
 * of an expired artifact answers 410 `gone`. Blobs written within FRESH_BLOB_GRACE_MS are
 * spared until a later sweep. Safe to run from several replicas at once.
 *
 * @returns how many blobs were deleted, and how many were spared as fresh
 * @example setInterval(() => void sweepExpiredArtifacts({ db, blobs }), 60 * 60 * 1000)
 */
export async function sweepExpiredArtifacts(deps: ExpirySweepDeps, options: { batch?: number } = {}): Promise<{ deleted: number; sparedFresh: number }> {
  const now = (deps.now ?? (() => new Date()))();
  const batch = options.batch ?? 500;
  let deleted = 0;
  let sparedFresh = 0;
  let after = '';
  for (;;) {
    const shas = await listUnreferencedExpiredSha256s(deps.db, { now, afterSha256: after, limit: batch });
    for (const sha256 of shas) {
      const outcome = await deleteIfUnreferenced(deps, sha256, now, FRESH_BLOB_GRACE_MS);
      if (outcome === 'deleted') deleted++;
      else if (outcome === 'fresh') sparedFresh++;
    }
    if (shas.length < batch) break;
    after = shas.at(-1)!;
  }
  return { deleted, sparedFresh };
}

/**
 * Deletes the bytes of `sha256` unless an unexpired artifact references them or they were
 * written within `graceMs`. For the sweep, and for an upload retry that replaced a row's bytes.
 */
export async function deleteIfUnreferenced(
  deps: ExpirySweepDeps,
  sha256: string,
  now = (deps.now ?? (() => new Date()))(),
  graceMs = 0,
): Promise<'deleted' | 'referenced' | 'fresh' | 'absent'> {
  if (await isSha256Referenced(deps.db, sha256, now)) return 'referenced';
  const stat = await deps.blobs.stat(sha256);
  if (!stat) return 'absent';
  if (graceMs > 0 && stat.modifiedAt && now.getTime() - stat.modifiedAt.getTime() < graceMs) return 'fresh';
  await deps.blobs.delete(sha256);
  return 'deleted';
}
