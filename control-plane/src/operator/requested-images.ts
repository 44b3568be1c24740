import { imageCacheKey, type RequestedImages } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { holdersOf, recentJobImages, type RequestedImageRow } from './requested-images-store.js';

/** Image references read per answer before they are merged by name: the long tail past them is left out. */
const REFERENCES_READ = 1_000;

/**
 * Merges job image references that name one image (`ubuntu`, `docker.io/library/ubuntu:latest`)
 * under its `imageCacheKey`, most jobs first (then the name), at most `limit`. Pure.
 */
export function mergeRequestedImages(rows: readonly RequestedImageRow[], limit: number): Array<{ image: string; jobs: number; last: Date }> {
  const merged = new Map<string, { image: string; jobs: number; last: Date }>();
  for (const row of rows) {
    const key = imageCacheKey(row.image, row.digest);
    if (key === null) continue;
    const known = merged.get(key);
    if (!known) merged.set(key, { image: key, jobs: row.jobs, last: new Date(row.last) });
    else {
      known.jobs += row.jobs;
      if (new Date(row.last) > known.last) known.last = new Date(row.last);
    }
  }
  return [...merged.values()].sort((a, b) => b.jobs - a.jobs || (a.image < b.image ? -1 : a.image > b.image ? 1 : 0)).slice(0, limit);
}

/**
 * The most requested images of the market over the last `days` (`requestedImagesSchema`), with
 * their holders on the market and on `farmIds`.
 */
export async function requestedImages(db: Queryable, params: { days: number; limit: number; farmIds: readonly string[] }): Promise<RequestedImages> {
  const top = mergeRequestedImages(await recentJobImages(db, { days: params.days, limit: REFERENCES_READ }), params.limit);
  const holders = await holdersOf(db, { keys: top.map((t) => t.image), farmIds: params.farmIds });
  return {
    days: params.days,
    data: top.map((t) => ({
      image: t.image,
      jobs: t.jobs,
      lastRequestedAt: t.last.toISOString(),
      machinesHolding: holders.get(t.image)?.market ?? 0,
      yourMachinesHolding: holders.get(t.image)?.yours ?? 0,
    })),
  };
}
