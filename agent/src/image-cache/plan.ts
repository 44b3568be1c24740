import { MAX_REPORTED_IMAGES, MAX_REPORTED_LAYERS, type ImageCacheReport } from '@gpufarm/shared';
import type { CacheEntry } from './index-file.js';

/** A layer by uncompressed digest and its bytes on disk. */
export interface SizedLayer {
  digest: string;
  bytes: number;
}

/**
 * Bytes the cache takes with `entries` and the extra layers (`extra`: pulls under way or
 * planned), every layer counted once, plus what history could not give a layer.
 *
 * @example cacheBytes([entry([['sha256:a…', 10], ['sha256:b…', 5]]), entry([['sha256:a…', 10]])], []) // 15
 */
export function cacheBytes(entries: readonly CacheEntry[], extra: readonly SizedLayer[] = []): number {
  const layers = new Map<string, number>();
  let unattributed = 0;
  for (const e of entries) {
    unattributed += e.unattributedBytes;
    for (const l of e.layers) layers.set(l.digest, Math.max(layers.get(l.digest) ?? 0, l.sizeBytes));
  }
  for (const l of extra) layers.set(l.digest, Math.max(layers.get(l.digest) ?? 0, l.bytes));
  let sum = unattributed;
  for (const b of layers.values()) sum += b;
  return sum;
}

export interface RoomRequest {
  budgetBytes: number;
  entries: readonly CacheEntry[];
  /** Ids of entries that running or assigned jobs need (or that cannot be removed): never evicted. */
  kept: ReadonlySet<string>;
  /** Layers of pulls already admitted and not yet recorded. */
  pending: readonly SizedLayer[];
  /** The image to make room for. */
  incoming: readonly SizedLayer[];
  /** False: only free room counts (the pre-pull list never evicts). */
  evict: boolean;
}

export type RoomPlan =
  | { fits: true; evict: CacheEntry[]; projectedBytes: number }
  | { fits: false; imageBytes: number; keptBytes: number; projectedBytes: number };

/**
 * Which images to evict so that `incoming` fits the budget beside what is kept (pure): the least
 * recently used first, each only if removing it frees bytes (an image whose layers the incoming
 * one or a kept one shares frees nothing). Nothing is evicted when even evicting every
 * candidate would not make room: the caller refuses instead.
 */
export function planRoom(req: RoomRequest): RoomPlan {
  const extra = [...req.pending, ...req.incoming];
  let kept = [...req.entries];
  const evict: CacheEntry[] = [];
  let projected = cacheBytes(kept, extra);
  if (req.evict) {
    const candidates = req.entries.filter((e) => !req.kept.has(e.id)).sort((a, b) => a.lastUsedAt.localeCompare(b.lastUsedAt) || a.id.localeCompare(b.id));
    for (const c of candidates) {
      if (projected <= req.budgetBytes) break;
      const without = kept.filter((e) => e !== c);
      const after = cacheBytes(without, extra);
      if (after < projected) {
        kept = without;
        evict.push(c);
        projected = after;
      }
    }
  }
  if (projected <= req.budgetBytes) return { fits: true, evict, projectedBytes: projected };
  return {
    fits: false,
    imageBytes: cacheBytes([], req.incoming),
    keptBytes: cacheBytes(req.entries.filter((e) => req.kept.has(e.id) || !req.evict), req.pending),
    projectedBytes: projected,
  };
}

/**
 * The cache as `heartbeat.images` carries it (pure): the most recently used images first, each
 * layer listed once; images past the report's bounds (`MAX_REPORTED_IMAGES`, `MAX_REPORTED_LAYERS`,
 * 256 layers or 16 names per image) are counted in `omitted`.
 */
export function cacheReport(entries: readonly CacheEntry[], budgetBytes: number): ImageCacheReport {
  const sorted = [...entries].sort((a, b) => b.lastUsedAt.localeCompare(a.lastUsedAt) || a.id.localeCompare(b.id));
  const layerIndex = new Map<string, number>();
  const layers: ImageCacheReport['layers'] = [];
  const images: ImageCacheReport['images'] = [];
  let omitted = 0;
  for (const e of sorted) {
    const fresh = new Set(e.layers.map((l) => l.digest).filter((d) => !layerIndex.has(d)));
    if (images.length >= MAX_REPORTED_IMAGES || layers.length + fresh.size > MAX_REPORTED_LAYERS || e.layers.length > 256) {
      omitted++;
      continue;
    }
    for (const l of e.layers) {
      if (!layerIndex.has(l.digest)) {
        layerIndex.set(l.digest, layers.length);
        layers.push({ digest: l.digest, sizeBytes: l.sizeBytes });
      }
    }
    images.push({
      id: e.id,
      repoDigests: e.repoDigests.slice(0, 16),
      repoTags: e.repoTags.slice(0, 16),
      layers: e.layers.map((l) => layerIndex.get(l.digest)!),
      lastUsedAt: e.lastUsedAt,
    });
  }
  return { budgetBytes, usedBytes: cacheBytes(entries), images, layers, omitted };
}
