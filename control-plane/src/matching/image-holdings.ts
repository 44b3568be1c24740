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

/**
 * Who holds how much of one image: `get` answers for a machine (undefined: nothing of it),
 * iterating lists every machine holding any of it, and `size` bounds their number (a walk over
 * the holders costs at most that).
 */
export interface ImageHolders extends Iterable<[string, ImageHolding]> {
  readonly size: number;
  get(machineId: string): ImageHolding | undefined;
}

/** For each wanted image key, its holders. */
export type ImageHoldings = Map<string, ImageHolders>;

/** A machine's report as matching reads it: each image's names reduced (`imageCacheKey`) and its layers resolved, once per report. */
export interface MachineImages {
  machineId: string;
  images: Array<{ keys: string[]; layers: Array<{ digest: string; sizeBytes: number }>; lastUsedAt: string }>;
  /** The digest of every layer the machine holds. */
  layerDigests: ReadonlySet<string>;
}

/** Reduces an image name as `imageCacheKey` does. */
export type ImageKeyOf = (name: string) => string | null;

/**
 * `imageCacheKey` remembered by name, for reading many reports: a market's reports repeat a few
 * names thousands of times, and parsing each again was most of a cold matcher's cost of reading
 * them. Forgets everything past `limit` names, so a long-lived matcher's memory stays bounded.
 */
export function rememberedImageKeys(limit = 10_000): ImageKeyOf {
  const known = new Map<string, string | null>();
  return (name) => {
    let key = known.get(name);
    if (key === undefined) {
      if (known.size >= limit) known.clear();
      key = imageCacheKey(name);
      known.set(name, key);
    }
    return key;
  };
}

/** A stored report as matching reads it; `keyOf` reduces its names (`rememberedImageKeys` when reading many). */
export function machineImagesOf({ machineId, report }: MachineImageReport, keyOf: ImageKeyOf = imageCacheKey): MachineImages {
  const images = report.images.map((image) => {
    const keys: string[] = [];
    for (const names of [image.repoDigests, image.repoTags]) {
      for (const name of names) {
        const key = keyOf(name);
        if (key !== null && !keys.includes(key)) keys.push(key);
      }
    }
    const layers: Array<{ digest: string; sizeBytes: number }> = [];
    for (const i of image.layers) {
      const layer = report.layers[i];
      if (layer) layers.push(layer);
    }
    return { keys, layers, lastUsedAt: image.lastUsedAt };
  });
  return { machineId, images, layerDigests: new Set(report.layers.map((l) => l.digest)) };
}

/**
 * Who holds how much of each image of `keys` (`imageCacheKey` names). An image's layers are
 * learnt from a machine that holds it under that name (the copy used most recently, so a moved
 * tag reads as it is now used); a machine then holds the bytes of those layers it has under any
 * image, and `exact` when it holds the image itself. `reports` must include the machines that
 * hold a wanted image by name (to learn from) and those whose layers count; a key no machine
 * holds by name is absent (its layers are unknown).
 */
export function imageHoldings(keys: Iterable<string>, reports: readonly MachineImageReport[]): ImageHoldings {
  return holdingsOf(keys, reports.map((r) => machineImagesOf(r)));
}

/** `imageHoldings` of reports already read as `machineImagesOf` does. */
export function holdingsOf(keys: Iterable<string>, machines: readonly MachineImages[]): ImageHoldings {
  const wanted = new Set(keys);
  const learnt = new Map<string, { layers: Array<{ digest: string; sizeBytes: number }>; at: string; machineId: string }>();
  const exact = new Map<string, Set<string>>();
  for (const { machineId, images } of machines) {
    for (const image of images) {
      for (const key of image.keys) {
        if (!wanted.has(key)) continue;
        let holders = exact.get(key);
        if (!holders) exact.set(key, (holders = new Set()));
        holders.add(machineId);
        const known = learnt.get(key);
        if (known && (known.at > image.lastUsedAt || (known.at === image.lastUsedAt && known.machineId < machineId))) continue;
        learnt.set(key, { layers: image.layers, at: image.lastUsedAt, machineId });
      }
    }
  }
  // Counted per machine when the matcher asks (`LazyHolders`): a base layer every machine holds
  // would otherwise make every machine a holder of every image, in every batch.
  const byId = new Map(machines.map((m) => [m.machineId, m]));
  return new Map([...learnt].map(([key, { layers }]) => [key, new LazyHolders([...new Map(layers.map((l) => [l.digest, l])).values()], exact.get(key) ?? new Set(), byId)]));
}

/** One image's holders among the machines read, each counted on first ask. */
class LazyHolders implements ImageHolders {
  private readonly counted = new Map<string, ImageHolding | undefined>();
  constructor(
    private readonly layers: ReadonlyArray<{ digest: string; sizeBytes: number }>,
    private readonly exact: ReadonlySet<string>,
    private readonly machines: ReadonlyMap<string, MachineImages>,
  ) {}

  get size(): number {
    return this.machines.size;
  }

  get(machineId: string): ImageHolding | undefined {
    if (this.counted.has(machineId)) return this.counted.get(machineId);
    const held = this.machines.get(machineId)?.layerDigests;
    let bytes = 0;
    if (held) for (const l of this.layers) if (held.has(l.digest)) bytes += l.sizeBytes;
    const exact = this.exact.has(machineId);
    const holding = bytes > 0 || exact ? { bytes, exact } : undefined;
    this.counted.set(machineId, holding);
    return holding;
  }

  *[Symbol.iterator](): Iterator<[string, ImageHolding]> {
    for (const machineId of this.machines.keys()) {
      const holding = this.get(machineId);
      if (holding) yield [machineId, holding];
    }
  }
}

/** The layer digests of the images `machines` hold under a name of `keys`: the layers whose holders count toward those images. */
export function wantedLayerDigests(keys: Iterable<string>, machines: readonly MachineImages[]): string[] {
  const wanted = new Set(keys);
  const digests = new Set<string>();
  for (const { images } of machines) {
    for (const image of images) {
      if (!image.keys.some((key) => wanted.has(key))) continue;
      for (const l of image.layers) digests.add(l.digest);
    }
  }
  return [...digests];
}
