import type { Queryable } from '../db/database.js';
import { countOnlineHolders } from './image-holders-store.js';

/** How many online machines hold an image (`imageCacheKey` name): what a job's estimate says of it. */
export type ImageHolderCount = (imageKey: string) => Promise<number>;

/**
 * Counts holders (`countOnlineHolders`), remembering each image's count for `ttlMs` (10 s) so
 * that a burst of creations of one image reads the database once; at most `maxImages` (1,000)
 * are remembered, the oldest forgotten first. An estimate may be that much behind the market.
 */
export function cachedImageHolderCount(db: Queryable, options: { ttlMs?: number; maxImages?: number; now?: () => number } = {}): ImageHolderCount {
  const ttlMs = options.ttlMs ?? 10_000;
  const maxImages = options.maxImages ?? 1_000;
  const now = options.now ?? Date.now;
  const known = new Map<string, { at: number; count: Promise<number> }>();
  return (imageKey) => {
    const hit = known.get(imageKey);
    if (hit && now() - hit.at < ttlMs) return hit.count;
    known.delete(imageKey);
    if (known.size >= maxImages) known.delete(known.keys().next().value!);
    const count = countOnlineHolders(db, imageKey);
    known.set(imageKey, { at: now(), count });
    // A failed count is not remembered: the next creation asks again.
    count.catch(() => known.delete(imageKey));
    return count;
  };
}
