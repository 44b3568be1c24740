import type Docker from 'dockerode';
import { errorText, formatBytes, type ImageCacheReport } from '@gpufarm/shared';
import { ensureImage, imageRunName, type ResolvedImage } from '../docker/image.js';
import type { ImagePullObserver } from '../runtime/docker-runtime.js';
import { readCacheIndex, writeCacheIndex, type CacheEntry } from './index-file.js';
import { cacheBytes, cacheReport, planRoom, type SizedLayer } from './plan.js';
import type { RegistryImage } from './registry-size.js';
import type { AgentLog } from '../logger/logger.js';

export interface ImageCacheDeps {
  docker: Docker;
  /** The index file (`<state_dir>/image-cache.json`). */
  file: string;
  /** `image_cache_bytes`. */
  budgetBytes: number;
  /** What the registry says of an image before it is pulled (`registryImage`). */
  lookup: (reference: string) => Promise<RegistryImage>;
  /** The references the runner's assignments need (running, or accepted and not started). */
  inUse: () => readonly string[];
  /** `prepull_images`. */
  prepullImages?: readonly string[];
  /** The longest the registry may take to say an image's size (default `LOOKUP_DEADLINE_MS`). */
  lookupDeadlineMs?: number;
  /** Free bytes of Docker's data root, or null when it cannot be read. */
  diskFree?: () => number | null;
  log: AgentLog;
  now?: () => Date;
}

/**
 * Past this the registry's answer is not waited for and the pull goes ahead unchecked: the
 * control plane gives an assignment up after `GF_ASSIGN_TIMEOUT_SECONDS` (60 s by default).
 */
export const LOOKUP_DEADLINE_MS = 20_000;

export type Admission = { admitted: true } | { admitted: false; message: string };

/**
 * The agent's image cache: the images it pulled for jobs or from the pre-pull list, kept under
 * `image_cache_bytes`. Before a pull it learns the image's size from the registry; an image
 * that cannot fit beside the images of running and assigned jobs is refused (the assignment is
 * rejected `image_cache_full`), otherwise the least recently used images no job needs are
 * removed until it fits. Admission and eviction run one at a time; a pull admitted and under
 * way holds its room (`pending`) until it is recorded or released.
 */
export class ImageCache implements ImagePullObserver {
  private entries = new Map<string, CacheEntry>();
  private readonly pending = new Map<string, { reference: string; layers: SizedLayer[] }>();
  /** Per holder, the id its unpinned name had on the machine, not the cache's: a pull that finds it unchanged records nothing. */
  private readonly foreign = new Map<string, string>();
  private lock: Promise<unknown> = Promise.resolve();
  private readonly now: () => Date;
  /** Bumped whenever what `report()` says changes (the daemon sends the report again). */
  version = 0;

  private constructor(private readonly deps: ImageCacheDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  /** Reads the index and drops images that are no longer on the machine (removed by hand). */
  static async open(deps: ImageCacheDeps): Promise<ImageCache> {
    const cache = new ImageCache(deps);
    let stored: CacheEntry[] = [];
    try {
      stored = readCacheIndex(deps.file);
    } catch (err) {
      // Jobs matter more than the index: start empty (what it listed stays on disk, unmanaged).
      deps.log.warn(`image cache: ${errorText(err)}; starting with an empty cache`);
    }
    for (const entry of stored) {
      // Docker not answering is no proof the image went: the entry stays as it was.
      const info = await inspect(deps.docker, entry.id).catch(() => undefined);
      if (info === undefined) {
        cache.entries.set(entry.id, entry);
        continue;
      }
      if (!info) {
        deps.log.info(`image cache: ${entry.references.join(', ')} is no longer on the machine; forgotten`);
        continue;
      }
      cache.entries.set(entry.id, { ...entry, repoDigests: info.RepoDigests ?? [], repoTags: info.RepoTags ?? [] });
    }
    cache.save();
    return cache;
  }

  get budgetBytes(): number {
    return this.deps.budgetBytes;
  }

  get usedBytes(): number {
    return cacheBytes([...this.entries.values()]);
  }

  /** The images held, most recently used first. */
  list(): CacheEntry[] {
    return [...this.entries.values()].sort((a, b) => b.lastUsedAt.localeCompare(a.lastUsedAt));
  }

  report(): ImageCacheReport {
    return cacheReport([...this.entries.values()], this.deps.budgetBytes);
  }

  /**
   * Makes room for `reference` before it is pulled, for `holder` (an assignment id). Admitted
   * at once when no pull is needed (the image is on the machine); otherwise the registry's size
   * decides: refused when it cannot fit the budget beside what jobs need, else the planned
   * images are removed and the room is held until `pulled` or `release`.
   */
  async admit(holder: string, reference: string, opts: { evict?: boolean } = {}): Promise<Admission> {
    const local = await this.onMachine(reference);
    if (local) {
      // Pinned: no pull. A tag is pulled again (it may have moved): an image the cache does not
      // hold (the operator's) stays out of it unless the pull brings another.
      if (!this.entries.has(local)) this.foreign.set(holder, local);
      return { admitted: true };
    }
    // Asked outside the lock: one slow registry does not hold up other assignments' answers.
    let image: RegistryImage;
    try {
      image = await withDeadline(this.deps.lookup(reference), this.deps.lookupDeadlineMs ?? LOOKUP_DEADLINE_MS);
    } catch (err) {
      // The pull would most likely fail the same way (unreachable, or a private registry the
      // agent has no credentials for): the job fails with the pull's own error, and the cache is
      // brought back within the budget after any pull.
      this.deps.log.warn(`image cache: the registry did not say the size of ${reference} (${errorText(err)}); pulling without a size check`);
      return { admitted: true };
    }
    return this.serial(async () => {
      const known = new Map<string, number>();
      for (const e of this.entries.values()) for (const l of e.layers) known.set(l.digest, l.sizeBytes);
      const incoming = image.layers.map((l) => ({ digest: l.diffId, bytes: known.get(l.diffId) ?? l.bytes }));
      let refused = new Set<string>();
      for (;;) {
        const plan = planRoom({ budgetBytes: this.deps.budgetBytes, entries: [...this.entries.values()], kept: new Set([...this.neededIds(), ...refused]), pending: this.pendingLayers(), incoming, evict: opts.evict ?? true });
        if (!plan.fits) {
          const ownBytes = cacheBytes([], incoming);
          return {
            admitted: false,
            message: ownBytes > this.deps.budgetBytes
              ? `the image ${reference} takes ${formatBytes(ownBytes)} on disk, more than this machine's image cache budget (image_cache_bytes, ${formatBytes(this.deps.budgetBytes)})`
              : `the image ${reference} (${formatBytes(ownBytes)} on disk) does not fit this machine's image cache budget (image_cache_bytes, ${formatBytes(this.deps.budgetBytes)}) beside the ${formatBytes(plan.keptBytes)} that running and assigned jobs' images${opts.evict === false ? ' and the cached images' : ''} take`,
          };
        }
        const failed = await this.evict(plan.evict);
        if (failed.length === 0) break;
        refused = new Set([...refused, ...failed]);
      }
      const free = this.deps.diskFree?.() ?? null;
      const download = image.layers.filter((l) => !known.has(l.diffId)).reduce((sum, l) => sum + l.bytes, 0);
      if (free !== null && download > free) {
        return { admitted: false, message: `the image ${reference} needs about ${formatBytes(download)} on disk and Docker's data root has ${formatBytes(free)} free` };
      }
      this.pending.set(holder, { reference, layers: incoming });
      return { admitted: true };
    });
  }

  /** Gives up the room `admit` held for `holder` (its start failed, or its image is recorded). */
  release(holder: string): void {
    this.pending.delete(holder);
    this.foreign.delete(holder);
  }

  /** `ImagePullObserver`: the image `holder` was admitted for is on the machine now; it joins the cache. */
  async pulled(holder: string, requested: string, image: ResolvedImage, source: CacheEntry['source'] = 'job'): Promise<void> {
    await this.serial(async () => {
      this.pending.delete(holder);
      const foreign = this.foreign.get(holder);
      this.foreign.delete(holder);
      if (foreign === image.imageId) return;
      // Both names go at eviction: the tag pulled by (unpinned) and the digest Docker recorded.
      const names = [...new Set([imageRunName(requested), image.reference])];
      const measured = await measure(this.deps.docker, image.imageId);
      if (!measured) return;
      const at = this.now().toISOString();
      const old = this.entries.get(image.imageId);
      this.entries.set(image.imageId, {
        id: image.imageId,
        references: [...new Set([...(old?.references ?? []), ...names])].slice(0, 16),
        source: old?.source ?? source,
        ...measured,
        pulledAt: old?.pulledAt ?? at,
        lastUsedAt: at,
      });
      this.changed();
      // The registry's sizes were an estimate: back under the budget with what no job needs.
      const over = planRoom({ budgetBytes: this.deps.budgetBytes, entries: [...this.entries.values()], kept: new Set([...this.neededIds(), image.imageId]), pending: this.pendingLayers(), incoming: [], evict: true });
      if (over.fits && over.evict.length > 0) await this.evict(over.evict);
    });
  }

  /** `ImagePullObserver`: a job started from the image; it becomes the most recently used. */
  async used(imageId: string): Promise<void> {
    const entry = this.entries.get(imageId);
    if (!entry) return;
    entry.lastUsedAt = this.now().toISOString();
    this.changed();
  }

  /**
   * Pulls the images of the pre-pull list that are not on the machine, one at a time, into the
   * room the budget has free (it never evicts for them); stops when `busy` says a job came.
   * Progress goes to the log.
   */
  async prepull(busy: () => boolean): Promise<void> {
    for (const reference of this.deps.prepullImages ?? []) {
      if (busy()) return;
      if ((await this.onMachine(reference).catch(() => null)) !== null) continue;
      const holder = `prepull:${reference}`;
      const admission = await this.admit(holder, reference, { evict: false });
      if (!admission.admitted) {
        this.deps.log.warn(`pre-pull: skipped ${reference}: ${admission.message}`);
        continue;
      }
      try {
        const image = await ensureImage(this.deps.docker, reference, null, (line) => this.deps.log.info(`pre-pull: ${line}`));
        if (image.pulled) await this.pulled(holder, reference, image, 'prepull');
      } catch (err) {
        this.deps.log.warn(`pre-pull: ${reference} failed: ${errorText(err)}`);
      } finally {
        this.release(holder);
      }
    }
  }

  /** The id of the image a job would run for `reference` (by digest when pinned), whoever pulled it; null when absent. */
  private async onMachine(reference: string): Promise<string | null> {
    const name = imageRunName(reference);
    const info = await inspect(this.deps.docker, name);
    if (!info) return null;
    return !name.includes('@') || (info.RepoDigests ?? []).includes(name) ? info.Id : null;
  }

  /** Ids of cached images that assignments need (matched by the names they run them by). */
  private neededIds(): string[] {
    const names = new Set(this.deps.inUse().map((r) => imageRunName(r)));
    return [...this.entries.values()].filter((e) => [...e.references, ...e.repoDigests, ...e.repoTags].some((n) => names.has(n))).map((e) => e.id);
  }

  private pendingLayers(): SizedLayer[] {
    return [...this.pending.values()].flatMap((p) => p.layers);
  }

  /** Removes each entry's own names (never `force`: an image a container uses stays); returns the ids that stayed. */
  private async evict(entries: readonly CacheEntry[]): Promise<string[]> {
    const stayed: string[] = [];
    for (const entry of entries) {
      let kept = false;
      for (const name of entry.references) {
        try {
          // A tag pulled again may name a newer image now: only a name that still names this one goes.
          if ((await inspect(this.deps.docker, name))?.Id !== entry.id) continue;
          await this.deps.docker.getImage(name).remove();
        } catch (err) {
          const code = (err as { statusCode?: number }).statusCode;
          if (code === 404) continue;
          this.deps.log.warn(`image cache: could not remove ${name}: ${errorText(err)}`);
          kept = true;
        }
      }
      if (kept) {
        stayed.push(entry.id);
        continue;
      }
      this.entries.delete(entry.id);
      this.deps.log.info(`image cache: evicted ${entry.references.join(', ')} (last used ${entry.lastUsedAt}) to stay within image_cache_bytes (${formatBytes(this.deps.budgetBytes)})`);
    }
    if (entries.length > stayed.length) this.changed();
    return stayed;
  }

  private changed(): void {
    this.version++;
    this.save();
  }

  private save(): void {
    try {
      writeCacheIndex(this.deps.file, [...this.entries.values()]);
    } catch (err) {
      this.deps.log.warn(`image cache: could not write ${this.deps.file}: ${errorText(err)}`);
    }
  }

  /** Runs `work` after every earlier admission or record: the budget is decided one pull at a time. */
  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.lock.then(work, work);
    this.lock = next.catch(() => undefined);
    return next;
  }
}

/** `work`'s result, or a rejection once `ms` passed. */
function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

async function inspect(docker: Docker, name: string): Promise<Docker.ImageInspectInfo | null> {
  try {
    return await docker.getImage(name).inspect();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return null;
    throw err;
  }
}

/**
 * An image's names and layers with their bytes. Docker gives a layer's size only through the
 * image's history, where entries that made no layer (ENV, CMD) are listed too: the entries with
 * bytes are matched to `RootFS.Layers` in order when their count agrees; otherwise the image's
 * whole size is counted unattributed (a layer of zero bytes makes the count disagree).
 */
async function measure(docker: Docker, id: string): Promise<Pick<CacheEntry, 'repoDigests' | 'repoTags' | 'layers' | 'unattributedBytes'> | null> {
  const info = await inspect(docker, id);
  if (!info) return null;
  const digests = info.RootFS?.Layers ?? [];
  const history = (await docker.getImage(id).history()) as Array<{ Size: number }>;
  const sized = [...history].reverse().filter((h) => h.Size > 0).map((h) => h.Size);
  const matched = sized.length === digests.length;
  return {
    repoDigests: info.RepoDigests ?? [],
    repoTags: info.RepoTags ?? [],
    layers: digests.map((digest, i) => ({ digest, sizeBytes: matched ? sized[i]! : 0 })),
    unattributedBytes: matched ? 0 : Math.max(0, info.Size),
  };
}
