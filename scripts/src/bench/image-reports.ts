import type { ImageCacheReport } from '@gpufarm/shared';

/**
 * The simulated images of the startup benches: `bench.local/startup/img-NN:1`, each a shared base
 * layer (0.1 GiB) and two layers of its own (1 to 9 GiB together), and the report an agent
 * holding some of them would send (`heartbeat.images`).
 */

const GiB = 2 ** 30;
const hex = (n: number, width = 64) => n.toString(16).padStart(width, '0');

export const benchImageName = (i: number) => `bench.local/startup/img-${String(i).padStart(2, '0')}:1`;

export const benchImageLayers = (i: number) => [
  { digest: `sha256:${hex(0xba5e)}`, sizeBytes: Math.round(GiB / 10) },
  { digest: `sha256:${hex(1_000 + 2 * i)}`, sizeBytes: (1 + (i % 5)) * GiB },
  { digest: `sha256:${hex(1_001 + 2 * i)}`, sizeBytes: (i % 5) * GiB },
];

/** What an agent whose cache holds `cache` (image numbers, with when each was last used) reports, most recently used first. */
export function benchImageReport(cache: ReadonlyArray<{ image: number; usedAt: number }>): ImageCacheReport {
  const layers = new Map<string, { digest: string; sizeBytes: number }>();
  const images = [...cache]
    .sort((a, b) => b.usedAt - a.usedAt)
    .map(({ image, usedAt }) => {
      const own = benchImageLayers(image);
      for (const l of own) layers.set(l.digest, l);
      const list = [...layers.keys()];
      return { id: `sha256:${hex(50_000 + image)}`, repoDigests: [], repoTags: [benchImageName(image)], layers: own.map((l) => list.indexOf(l.digest)), lastUsedAt: new Date(usedAt).toISOString() };
    });
  const all = [...layers.values()];
  return { budgetBytes: 100 * GiB, usedBytes: all.reduce((n, l) => n + l.sizeBytes, 0), images, layers: all, omitted: 0 };
}
