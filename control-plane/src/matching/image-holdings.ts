import { imageCacheKey, type ImageCacheReport } from '@gpufarm/shared';

/**
 * How much of a job's image each machine already holds, from the agents' image reports
 * (protocol 8, stored by the gateway in `machine_images`). Pure: the store reads the reports,
 * the pool (`plan.ts`) reads the answer.
 */

/** How much of one image a machine holds. */
export interface ImageHolding {
  /** Bytes of the image's layers (uncompressed) the machine holds, under any of its images. */
  bytes: number;
  /** It holds the image itself, under the name the job asks for. */
  exact: boolean;
}

/** Nothing of the image. */
export const NO_HOLDING: ImageHolding = { bytes: 0, exact: false };

/** Positive when `a` holds more of the image than `b`: more bytes, then the exact image. */
export function compareHoldings(a: ImageHolding, b: ImageHolding): number {
  if (a.bytes !== b.bytes) return a.bytes - b.bytes;
  return Number(a.exact) - Number(b.exact);
}

/** A machine's stored report (`machine_images.report`). */
export interface MachineImageReport {
  machineId: string;
  report: Pick<ImageCacheReport, 'images' | 'layers'>;
}

/** For each wanted image key, each machine holding any of it (bytes > 0 or the exact image) and how much. */
export type ImageHoldings = Map<string, Map<string, ImageHolding>>;

/**
 * Who holds how much of each image of `keys` (`imageCacheKey` names). An image's layers are
 * learnt from a machine that holds it under that name (the copy used most recently, so a moved
 * tag reads as it is now used); a machine then holds the bytes of those layers it has under any
 * image, and `exact` when it holds the image itself. `reports` must include the machines that
 * hold a wanted image by name (to learn from) and those whose layers count; a key no machine
 * holds by name is absent (its layers are unknown).
 */
export function imageHoldings(keys: Iterable<string>, reports: readonly MachineImageReport[]): ImageHoldings {
  const wanted = new Set(keys);
  const learnt = new Map<string, { layers: Array<{ digest: string; sizeBytes: number }>; at: string; machineId: string }>();
  const exact = new Map<string, string[]>();
  for (const { machineId, report } of reports) {
    for (const image of report.images) {
      const names = new Set<string>();
      for (const name of [...image.repoDigests, ...image.repoTags]) {
        const key = imageCacheKey(name);
        if (key !== null && wanted.has(key)) names.add(key);
      }
      for (const key of names) {
        exact.set(key, [...(exact.get(key) ?? []), machineId]);
        const known = learnt.get(key);
        if (known && (known.at > image.lastUsedAt || (known.at === image.lastUsedAt && known.machineId < machineId))) continue;
        const layers = image.layers.flatMap((i) => (report.layers[i] ? [report.layers[i]] : []));
        learnt.set(key, { layers, at: image.lastUsedAt, machineId });
      }
    }
  }
  // Each learnt layer's digest → the images it belongs to, with its size.
  const byDigest = new Map<string, Array<{ key: string; sizeBytes: number }>>();
  for (const [key, { layers }] of learnt) {
    for (const layer of new Map(layers.map((l) => [l.digest, l])).values()) byDigest.set(layer.digest, [...(byDigest.get(layer.digest) ?? []), { key, sizeBytes: layer.sizeBytes }]);
  }
  const holdings: ImageHoldings = new Map([...learnt.keys()].map((key) => [key, new Map<string, ImageHolding>()]));
  for (const { machineId, report } of reports) {
    const seen = new Set<string>();
    for (const layer of report.layers) {
      if (seen.has(layer.digest)) continue;
      seen.add(layer.digest);
      for (const { key, sizeBytes } of byDigest.get(layer.digest) ?? []) {
        const held = holdings.get(key)!;
        const h = held.get(machineId);
        if (h) h.bytes += sizeBytes;
        else held.set(machineId, { bytes: sizeBytes, exact: false });
      }
    }
  }
  for (const [key, machines] of exact) {
    const held = holdings.get(key)!;
    for (const machineId of machines) {
      const h = held.get(machineId);
      if (h) h.exact = true;
      else held.set(machineId, { bytes: 0, exact: true });
    }
  }
  return holdings;
}

/** The layer digests of the images `reports` hold under a name of `keys`: the layers whose holders count toward those images. */
export function wantedLayerDigests(keys: Iterable<string>, reports: readonly MachineImageReport[]): string[] {
  const wanted = new Set(keys);
  const digests = new Set<string>();
  for (const { report } of reports) {
    for (const image of report.images) {
      if (![...image.repoDigests, ...image.repoTags].some((name) => wanted.has(imageCacheKey(name) ?? ''))) continue;
      for (const i of image.layers) if (report.layers[i]) digests.add(report.layers[i].digest);
    }
  }
  return [...digests];
}
